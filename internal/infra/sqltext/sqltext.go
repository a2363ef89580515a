// Package sqltext holds SQL statements as text a reviewer can read: a
// statement is a text/template with named slots for what the
// configuration decides (quoted identifiers, SQL fragments, switches) and
// named parameters, numbered $1, $2, … in the order they first appear.
//
//	UPDATE {{.Table}} SET {{.Status}} = {{arg "to"}} WHERE {{.Status}} = {{arg "from"}}
//
// Slots come from a struct (its exported fields and methods): a slot the
// text names that the struct lacks, or a field or method of the struct
// the text never names, is an error, so the text and the code that fills
// it cannot drift apart. A parameter named in the rendered text but not
// given, or given but not named, is an error too. Slots hold identifiers
// quoted by one function, the driver's pq.QuoteIdentifier, through Ident
// in the daemon: Ident(schema, "table") for the sidecar's own tables (a
// schema name may hold a dot: it is one part); and through claims.Ident
// (each dotted part of a name the configuration gives) for the engine
// tables, in the library engines import, which may depend on nothing of
// the daemon.
//
// A statement whose text depends only on what is fixed for a process (a
// schema's name) is prepared once (Prepare) and run with its parameters
// given by name at each call (Prepared.Bind, Get, Select, Exec).
package sqltext

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Ident quotes an SQL identifier of one or more parts (a schema, then a
// table or other name in it), each as a whole, joined by dots: every
// identifier the project writes into SQL text is quoted here.
func Ident(parts ...string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = pq.QuoteIdentifier(p)
	}
	return strings.Join(q, ".")
}

// Template is one named statement.
type Template struct {
	name string
	t    *template.Template
	// refs lists the slot names the text refers to, anywhere (every branch).
	refs []string
	// checked holds the slot struct types already checked against refs.
	checked sync.Map // reflect.Type → error
}

// argMark wraps a parameter's name in the executed text; Render numbers
// them. NUL never appears in SQL text.
const argMark = "\x00"

var argRef = regexp.MustCompile(argMark + `([^` + argMark + `]*)` + argMark)

// Arg is the parameter name's place in an SQL fragment built in Go and
// handed to a template as a slot: Render numbers it with the text's own.
func Arg(name string) string { return argMark + name + argMark }

// New parses text as the statement name. It panics on a malformed
// template: statements are package variables, checked by every test.
func New(name, text string) *Template {
	t, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"arg": func(n string) string { return argMark + n + argMark },
	}).Parse(text)
	if err != nil {
		panic(fmt.Sprintf("sqltext: %s: %v", name, err))
	}
	tp := &Template{name: name, t: t}
	for _, tr := range t.Templates() {
		if tr.Tree != nil {
			walk(tr.Root, func(f string) {
				if !slices.Contains(tp.refs, f) {
					tp.refs = append(tp.refs, f)
				}
			})
		}
	}
	slices.Sort(tp.refs)
	return tp
}

// Load parses the file name of fsys as a statement named after it.
func Load(fsys embed.FS, name string) *Template {
	b, err := fsys.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("sqltext: %v", err))
	}
	return New(name, string(b))
}

// Name of the statement.
func (t *Template) Name() string { return t.name }

// Files are a package's statements, sql/<name>.sql of its embedded
// files, rendered once (their text depends only on what is fixed for a
// process): it keeps every statement it prepared and every fragment it
// rendered, for the tests (their golden files, no file left unused).
type Files struct {
	fsys fs.FS
	// All holds the statements prepared; Fragments, the names of the files
	// rendered as fragments.
	All       []Prepared
	Fragments []string
}

// NewFiles returns the statements of fsys (a package's embed.FS), none
// rendered yet.
func NewFiles(fsys fs.FS) *Files { return &Files{fsys: fsys} }

// Load parses sql/<name>.sql as a statement named after it; it panics
// when there is no such file.
func (f *Files) Load(name string) *Template {
	path := "sql/" + name + ".sql"
	b, err := fs.ReadFile(f.fsys, path)
	if err != nil {
		panic(fmt.Sprintf("sqltext: %v", err))
	}
	return New(path, string(b))
}

// MustPrepare prepares the statement sql/<name>.sql with slots fixed by
// the code (MustPrepare) and keeps it.
func (f *Files) MustPrepare(name string, slots any) Prepared {
	p := f.Load(name).MustPrepare(slots)
	f.All = append(f.All, p)
	return p
}

// MustFragment renders sql/<name>.sql as a fragment (Fragment), without
// its last line break, with slots fixed by the code, and keeps its name;
// it panics on an error.
func (f *Files) MustFragment(name string, slots any) string {
	s, err := f.Load(name).Fragment(slots)
	if err != nil {
		panic(err)
	}
	f.Fragments = append(f.Fragments, name)
	return strings.TrimRight(s, "\n")
}

// Statement is a rendered statement: its SQL, its parameters' values in
// $n order, and their names.
type Statement struct {
	SQL   string
	Args  []any
	Names []string
}

// Header lists the statement's parameters as an SQL comment, one per
// line ("-- $1 workflow").
func (s Statement) Header() string {
	var b strings.Builder
	for i, n := range s.Names {
		fmt.Fprintf(&b, "-- $%d %s\n", i+1, n)
	}
	return b.String()
}

// Args of a statement, by name.
type Args map[string]any

// Render executes the statement with slots (a struct, or a pointer to
// one; nil for none) and the parameters args.
func (t *Template) Render(slots any, args Args) (Statement, error) {
	p, err := t.Prepare(slots)
	if err != nil {
		return Statement{}, err
	}
	return p.Statement(args)
}

// Prepared is a statement rendered before its parameters' values are
// known (a statement whose text depends only on the configuration,
// rendered once): its SQL and its parameters' names in $n order. Bind
// gives their values in that order.
type Prepared struct {
	name  string
	SQL   string
	Names []string
}

// Prepare executes the statement with slots (a struct, or a pointer to
// one; nil for none), leaving the parameters' values to Bind.
func (t *Template) Prepare(slots any) (Prepared, error) {
	if err := t.check(slots); err != nil {
		return Prepared{}, err
	}
	var b bytes.Buffer
	if err := t.t.Execute(&b, slots); err != nil {
		return Prepared{}, fmt.Errorf("sqltext: %s: %w", t.name, err)
	}
	p := Prepared{name: t.name}
	index := map[string]int{}
	p.SQL = argRef.ReplaceAllStringFunc(b.String(), func(m string) string {
		n := m[len(argMark) : len(m)-len(argMark)]
		i, ok := index[n]
		if !ok {
			p.Names = append(p.Names, n)
			i = len(p.Names)
			index[n] = i
		}
		return "$" + strconv.Itoa(i)
	})
	return p, nil
}

// MustPrepare is Prepare for slots fixed by the code (every test
// prepares each statement): it panics on an error.
func (t *Template) MustPrepare(slots any) Prepared {
	p, err := t.Prepare(slots)
	if err != nil {
		panic(err)
	}
	return p
}

// Fragment executes the text as a part of other statements, handed to
// them as a slot (a join several statements share): its parameters stay
// named, numbered by the Render or Prepare of the statement that holds
// it, with its own.
func (t *Template) Fragment(slots any) (string, error) {
	if err := t.check(slots); err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.t.Execute(&b, slots); err != nil {
		return "", fmt.Errorf("sqltext: %s: %w", t.name, err)
	}
	return b.String(), nil
}

// Name of the statement.
func (p Prepared) Name() string { return p.name }

// Header lists the statement's parameters as an SQL comment, as
// Statement.Header does.
func (p Prepared) Header() string { return Statement{Names: p.Names}.Header() }

// Bind returns the values of args in the statement's $n order. A
// parameter the text uses but args lacks, or one args gives that the
// text does not use, is an error.
func (p Prepared) Bind(args Args) ([]any, error) {
	values := make([]any, len(p.Names))
	var missing []string
	for i, n := range p.Names {
		v, given := args[n]
		if !given {
			missing = append(missing, n)
		}
		values[i] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("sqltext: %s: parameters %s are used but not given", p.name, strings.Join(missing, ", "))
	}
	if len(args) > len(p.Names) {
		var unused []string
		for n := range args {
			if !slices.Contains(p.Names, n) {
				unused = append(unused, n)
			}
		}
		slices.Sort(unused)
		return nil, fmt.Errorf("sqltext: %s: parameters %s are given but not used", p.name, strings.Join(unused, ", "))
	}
	return values, nil
}

// Statement is p with the values of args bound (Bind).
func (p Prepared) Statement(args Args) (Statement, error) {
	values, err := p.Bind(args)
	if err != nil {
		return Statement{}, err
	}
	return Statement{SQL: p.SQL, Args: values, Names: p.Names}, nil
}

// Get runs p with the values of args (Bind) on q and scans its one row
// into dest (sqlx.GetContext).
func (p Prepared) Get(ctx context.Context, q sqlx.QueryerContext, dest any, args Args) error {
	values, err := p.Bind(args)
	if err != nil {
		return err
	}
	return sqlx.GetContext(ctx, q, dest, p.SQL, values...)
}

// Select runs p with the values of args (Bind) on q and scans its rows
// into dest (sqlx.SelectContext).
func (p Prepared) Select(ctx context.Context, q sqlx.QueryerContext, dest any, args Args) error {
	values, err := p.Bind(args)
	if err != nil {
		return err
	}
	return sqlx.SelectContext(ctx, q, dest, p.SQL, values...)
}

// Exec runs p with the values of args (Bind) on e.
func (p Prepared) Exec(ctx context.Context, e sqlx.ExecerContext, args Args) (sql.Result, error) {
	values, err := p.Bind(args)
	if err != nil {
		return nil, err
	}
	return e.ExecContext(ctx, p.SQL, values...)
}

// MustRender is Render for statements whose slots and parameters are
// fixed by the code (a test renders each shape): it panics on an error.
func (t *Template) MustRender(slots any, args Args) Statement {
	st, err := t.Render(slots, args)
	if err != nil {
		panic(err)
	}
	return st
}

// check compares the slots the text refers to with the exported fields
// and methods of slots' type, once per type.
func (t *Template) check(slots any) error {
	typ := reflect.TypeOf(slots)
	if v, ok := t.checked.Load(typ); ok {
		err, _ := v.(error)
		return err
	}
	var have []string
	if typ != nil {
		st := typ
		if st.Kind() == reflect.Pointer {
			st = st.Elem()
		}
		if st.Kind() == reflect.Struct {
			for _, f := range reflect.VisibleFields(st) {
				if f.IsExported() && !f.Anonymous {
					have = append(have, f.Name)
				}
			}
		}
		for i := range typ.NumMethod() {
			have = append(have, typ.Method(i).Name)
		}
	}
	var errs []string
	for _, r := range t.refs {
		if !slices.Contains(have, r) {
			errs = append(errs, "the text names slot "+r+", which "+fmt.Sprint(typ)+" lacks")
		}
	}
	for _, h := range have {
		if !slices.Contains(t.refs, h) {
			errs = append(errs, fmt.Sprint(typ)+"'s "+h+" is never named by the text")
		}
	}
	var err error
	if len(errs) > 0 {
		err = fmt.Errorf("sqltext: %s: %s", t.name, strings.Join(errs, "; "))
	}
	t.checked.Store(typ, err)
	return err
}

// walk calls fn with the first name of every reference to a slot under
// n: a field of dot where dot is the slots (.Name), or of the slots
// anywhere ($.Name). Inside a range or with, dot is something else: its
// fields there are not slots.
func walk(n parse.Node, fn func(string)) { walkDot(n, fn, true) }

func walkDot(n parse.Node, fn func(string), top bool) {
	switch n := n.(type) {
	case nil:
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkDot(c, fn, top)
		}
	case *parse.ActionNode:
		walkDot(n.Pipe, fn, top)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkDot(c, fn, top)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkDot(a, fn, top)
		}
	case *parse.FieldNode:
		if top {
			fn(n.Ident[0])
		}
	case *parse.VariableNode:
		if n.Ident[0] == "$" && len(n.Ident) > 1 {
			fn(n.Ident[1])
		}
	case *parse.ChainNode:
		walkDot(n.Node, fn, top)
	case *parse.IfNode:
		walkDot(n.Pipe, fn, top)
		walkDot(n.List, fn, top)
		walkDot(n.ElseList, fn, top)
	case *parse.RangeNode:
		// (The else branch runs with dot unchanged.)
		walkDot(n.Pipe, fn, top)
		walkDot(n.List, fn, false)
		walkDot(n.ElseList, fn, top)
	case *parse.WithNode:
		walkDot(n.Pipe, fn, top)
		walkDot(n.List, fn, false)
		walkDot(n.ElseList, fn, top)
	case *parse.TemplateNode:
		walkDot(n.Pipe, fn, top)
	}
}
