package claims

import (
	"embed"
	"fmt"
	"strings"
	"sync"
	"text/template"
)

// files holds the package's SQL, as templates, one statement (or part of one)
// a file; the golden files in testdata/ show them rendered. claims, which
// engines import, depends on no package of the daemon
// (internal/infra/sqltext): it renders them with text/template alone, so
// its statements number their parameters by hand, and list them in their
// headers (the golden test checks both).
//
//go:embed sql/*.sql
var files embed.FS

// templates holds the files of sql/, each named by its file's name. It panics
// on a malformed template: every test parses them.
var templates = template.Must(template.New("").Option("missingkey=error").ParseFS(files, "sql/*.sql"))

// render executes sql/<name>.sql with slots.
func render(name string, slots any) (string, error) {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name+".sql", slots); err != nil {
		return "", err
	}
	return b.String(), nil
}

// statement is a file of sql/ rendered: its name, the slots it was
// rendered with (for the tests), and its text.
type statement struct {
	name  string
	slots any
	sql   string
}

// prepare renders sql/<name>.sql with slots fixed by the code. The tests
// render every file: an error is a bug, and panics.
func prepare(name string, slots any) statement {
	s, err := render(name, slots)
	if err != nil {
		panic(fmt.Sprintf("claims: %v", err))
	}
	return statement{name: name, slots: slots, sql: s}
}

// The slots of the statements over a Table: its names, quoted (Ident).
type (
	// instanceSlots names the instance table, its id and status columns.
	instanceSlots struct{ Instances, ID, Status string }
	// claimSlots names the claims table and its columns.
	claimSlots struct{ Claims, Instance, Node, Token, ClaimedAt, ExpiresAt string }
	// heldSlots names the claims table and the columns that say a claim is
	// held (its instance's, its token, its expiry).
	heldSlots struct{ Claims, Instance, Token, ExpiresAt string }
	// expirySlots names the claims table and its expiry column.
	expirySlots struct{ Claims, ExpiresAt string }
	// holderSlots names the claims table's columns a holder is told by, and
	// the caller's instance row (its alias) and its id column.
	holderSlots struct{ Claims, Instance, Node, ExpiresAt, Alias, ID string }
)

func (t Table) instanceSlots() instanceSlots {
	return instanceSlots{Instances: Ident(t.Instances), ID: Ident(t.IDColumn), Status: Ident(t.StatusColumn)}
}

func (t Table) claimSlots() claimSlots {
	return claimSlots{Claims: Ident(t.Claims), Instance: Ident(t.InstanceColumn), Node: Ident(t.NodeColumn),
		Token: Ident(t.TokenColumn), ClaimedAt: Ident(t.ClaimedAtColumn), ExpiresAt: Ident(t.ExpiresAtColumn)}
}

// protocol holds the statements of the claim protocol over one Table.
type protocol struct {
	// Claim and ClaimNext: one of the locks, then insertClaim and
	// enterInterim.
	lockInstance, lockNext, insertClaim, enterInterim statement
	renew                                             statement
	// Finish and Release.
	deleteClaim, leaveInterim statement
	countExpired, lookup      statement
}

// all returns every statement of p, for the tests.
func (p protocol) all() []statement {
	return []statement{p.lockInstance, p.lockNext, p.insertClaim, p.enterInterim, p.renew, p.deleteClaim, p.leaveInterim,
		p.countExpired, p.lookup}
}

// rendered holds the protocol of each Table used, rendered once.
var rendered sync.Map // Table → protocol

// protocol returns t's statements.
func (t Table) protocol() protocol {
	if p, ok := rendered.Load(t); ok {
		return p.(protocol)
	}
	in, cl := t.instanceSlots(), t.claimSlots()
	held := heldSlots{Claims: cl.Claims, Instance: cl.Instance, Token: cl.Token, ExpiresAt: cl.ExpiresAt}
	p := protocol{
		lockInstance: prepare("lock_instance", in),
		lockNext:     prepare("lock_next", in),
		insertClaim:  prepare("insert_claim", cl),
		enterInterim: prepare("enter_interim", in),
		renew:        prepare("renew", held),
		deleteClaim:  prepare("delete_claim", held),
		leaveInterim: prepare("leave_interim", in),
		countExpired: prepare("count_expired", expirySlots{Claims: cl.Claims, ExpiresAt: cl.ExpiresAt}),
		lookup:       prepare("lookup", cl),
	}
	rendered.Store(t, p)
	return p
}

// holder returns HolderSQL's expression over the instance row aliased alias,
// without its file's last newline (a part of the caller's statement).
func (t Table) holder(alias string) statement {
	cl := t.claimSlots()
	s := prepare("holder", holderSlots{Claims: cl.Claims, Instance: cl.Instance, Node: cl.Node, ExpiresAt: cl.ExpiresAt,
		Alias: alias, ID: Ident(t.IDColumn)})
	s.sql = strings.TrimSuffix(s.sql, "\n")
	return s
}
