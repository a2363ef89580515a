package configs

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"

	"github.com/enginehealth/enginehealth/internal/infra/safefile"
)

// The loader runs as root under systemd: every input is bounded before it
// costs memory or time.
const (
	// MaxConfigBytes bounds the configuration file.
	MaxConfigBytes = 1 << 20
	// MaxSecretBytes bounds a secret file (DSN, API token).
	MaxSecretBytes = 64 << 10
	// maxSeparators bounds the YAML separators (,[]{}:- and newlines) of
	// a file, and with them the tokens the lexer makes (about 250 bytes
	// each) and the parser's work: real configurations have a few hundred.
	maxSeparators = 40000
	// maxFlowDepth and maxBlockDepth bound nesting: the parser's cost
	// grows with the square of it. Ours is at most 7 deep.
	maxFlowDepth  = 16
	maxBlockDepth = 32
	// maxString bounds any string value.
	maxString = 4096
	// maxSiblings bounds the keys of one block mapping or the entries of
	// one block list.
	maxSiblings = 2000
	// excerptLen is how much of a bad value a message quotes.
	excerptLen = 40
)

// readFile reads a regular file of at most limit bytes (safefile.Read):
// it never blocks on a FIFO or device and never reads more than limit+1
// bytes. Errors name the path.
func readFile(path string, limit int64) ([]byte, error) {
	data, err := safefile.Read(path, limit)
	var e *safefile.Error
	switch {
	case errors.As(err, &e):
		return nil, fmt.Errorf("%s: %w", pathText(path), err)
	case err != nil:
		return nil, unwrapPathError(err)
	}
	return data, nil
}

// pathText is a file path or a variable's name as an error says it: as
// it is when printable and not over 256 bytes (a path can be long), else
// an excerpt (a value from a config can be anything).
func pathText(p string) string {
	if len(p) <= 256 && !strings.ContainsFunc(p, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return p
	}
	return excerpt(p)
}

// excerpt quotes at most excerptLen runes of s, with Go escapes, so a huge
// or hostile value never reaches a log or terminal whole. Credentials are
// masked first (see redact), so no cut can show part of a password.
func excerpt(s string) string {
	return excerptN(s, excerptLen)
}

// excerptN is excerpt with room for n runes.
func excerptN(s string, n int) string {
	s = redact(s)
	if utf8.RuneCountInString(s) <= n && len(s) <= 4*n {
		return strconv.Quote(s)
	}
	cut := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("…(%d bytes)", len(s))
}

// checkShape bounds a file before it is parsed: the number of separators,
// the nesting depth, and no anchors, aliases or merge keys (never needed
// here, and alias expansion is a memory bomb).
func checkShape(data []byte) *Problem {
	seps := 0
	for _, c := range data {
		switch c {
		case ',', '[', ']', '{', '}', ':', '-', '\n':
			seps++
		}
	}
	if seps > maxSeparators {
		return &Problem{Path: docPath, Msg: fmt.Sprintf("too large: %d YAML separators, more than the limit of %d for a configuration", seps, maxSeparators)}
	}
	if !utf8.Valid(data) {
		return &Problem{Path: docPath, Msg: "not valid UTF-8"}
	}
	toks := lexer.Tokenize(string(data))
	flow := 0
	var block []blockNode // the open block nodes
	for i, tk := range toks {
		line, col := 0, 0
		if tk.Position != nil {
			line, col = tk.Position.Line, tk.Position.Column
		}
		at := func(msg string) *Problem {
			return &Problem{Path: pathAtLine(data, line), Line: line, Msg: msg}
		}
		switch tk.Type {
		case token.AnchorType, token.AliasType:
			return at("anchors and aliases (& and *) are not allowed in the configuration")
		case token.MergeKeyType:
			return at("merge keys (<<) are not allowed in the configuration")
		case token.SequenceStartType, token.MappingStartType:
			flow++
			if flow > maxFlowDepth {
				return at(fmt.Sprintf("nested more than %d levels deep", maxFlowDepth))
			}
		case token.SequenceEndType, token.MappingEndType:
			flow--
		case token.SequenceEntryType:
			if flow == 0 {
				block = openBlock(block, col)
			}
		case token.MappingValueType:
			// The key is the token before the ':'.
			if flow == 0 && i > 0 && toks[i-1].Position != nil {
				k := toks[i-1].Position
				block = openBlock(block, k.Column)
			}
		}
		if len(block) > maxBlockDepth {
			return at(fmt.Sprintf("nested more than %d levels deep", maxBlockDepth))
		}
		if len(block) > 0 && block[len(block)-1].n > maxSiblings {
			return at(fmt.Sprintf("more than %d keys or items in one mapping or list", maxSiblings))
		}
	}
	return nil
}

// openBlock records a block node (a sequence entry or a key) opened at
// column col: the nodes open at the same or a deeper column are closed
// first. Entries on one line ("- - x", "- key: v") nest.
// A key or entry at the column of the innermost open node is its sibling:
// it is counted there (the YAML parser's work grows with the square of
// the siblings, so their number is bounded).
func openBlock(block []blockNode, col int) []blockNode {
	for len(block) > 0 && block[len(block)-1].col > col {
		block = block[:len(block)-1]
	}
	if len(block) > 0 && block[len(block)-1].col == col {
		block[len(block)-1].n++
		return block
	}
	return append(block, blockNode{col: col, n: 1})
}

// blockNode is an open block mapping or sequence: the column of its keys
// or entries and how many it has had.
type blockNode struct{ col, n int }

// docPath names the whole document in a Problem.
const docPath = "(document)"

var keyLine = regexp.MustCompile(`^("[^"]*"|'[^']*'|[^\s:#'"\[\]{},][^:#]*?)\s*:(\s|$)`)

// pathAtLine returns the key path that encloses line (1-based) of a YAML
// text, from indentation alone: what a syntax error's message can name
// when there is no syntax tree.
func pathAtLine(data []byte, line int) string {
	type frame struct {
		col  int
		name string // key, or "" for a sequence item
		idx  int    // index of a sequence item
	}
	var stack []frame
	lines := strings.Split(string(data), "\n")
	for n := 0; n < line && n < len(lines); n++ {
		text := strings.TrimRight(lines[n], "\r")
		rest := strings.TrimLeft(text, " \t")
		if rest == "" || strings.HasPrefix(rest, "#") || strings.HasPrefix(rest, "---") {
			continue
		}
		col := len(text) - len(rest)
		for rest == "-" || strings.HasPrefix(rest, "- ") {
			for len(stack) > 0 && stack[len(stack)-1].col > col {
				stack = stack[:len(stack)-1]
			}
			if top := len(stack) - 1; top >= 0 && stack[top].col == col && stack[top].name == "" {
				stack[top].idx++
			} else {
				stack = append(stack, frame{col: col})
			}
			trimmed := strings.TrimLeft(strings.TrimPrefix(rest, "-"), " ")
			col += len(rest) - len(trimmed)
			rest = trimmed
		}
		m := keyLine.FindStringSubmatch(rest)
		if m == nil {
			// A line that is no key closes what is open at its column or
			// deeper (a continuation is indented deeper than its key).
			for len(stack) > 0 && stack[len(stack)-1].col >= col && stack[len(stack)-1].name != "" {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].col >= col && stack[len(stack)-1].name != "" ||
			len(stack) > 0 && stack[len(stack)-1].col > col {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, frame{col: col, name: pathKey(strings.Trim(strings.TrimSpace(m[1]), `"'`))})
	}
	var b strings.Builder
	const maxShown = 12
	for i, f := range stack {
		if i == maxShown {
			b.WriteString("…")
			break
		}
		if f.name == "" {
			fmt.Fprintf(&b, "[%d]", f.idx)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.name)
	}
	if b.Len() == 0 {
		return docPath
	}
	return b.String()
}

// decoder maps a YAML syntax tree onto the configuration structs by their
// yaml tags, strictly: every unknown or duplicate key, wrong kind, value
// that does not fit its type, NaN, infinity, control character or bad
// duration is a Problem with its key path and line, and decoding goes on,
// so a file's problems are all reported at once.
type decoder struct {
	v *validator
	// zeros are the values the file gives as 0 or "": if a default
	// replaces one (see explicitZeros), the file says something that is
	// not in force, and that is a problem.
	zeros []zeroValue
}

type zeroValue struct {
	path string
	line int
	rv   reflect.Value
}

// explicitZeros reports every value written as 0 or "" that a default
// has since replaced: omit the key to get the default.
func (d *decoder) explicitZeros() {
	for _, z := range d.zeros {
		if !z.rv.IsZero() {
			d.v.addAt(z.path, z.line, "0 or empty is not a setting here: omit the key for the default (%v)", z.rv.Interface())
		}
	}
}

var durationType = reflect.TypeFor[time.Duration]()

func line(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

func (d *decoder) problem(path string, n ast.Node, format string, args ...any) {
	d.v.addAt(path, line(n), format, args...)
	if d.v.bad == nil {
		d.v.bad = map[string]bool{}
	}
	d.v.bad[path] = true
}

// decode stores node n into rv (addressable), at key path path.
func (d *decoder) decode(n ast.Node, rv reflect.Value, path string) {
	if _, ok := n.(*ast.TagNode); ok {
		d.problem(path, n, "YAML tags (!!str, !custom...) are not allowed: write the value itself")
		return
	}
	switch n.(type) {
	case nil, *ast.NullNode:
		return // absent: the default applies
	case *ast.AnchorNode, *ast.AliasNode, *ast.MergeKeyNode:
		d.problem(path, n, "anchors, aliases and merge keys are not allowed")
		return
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.String:
		defer func() {
			if rv.IsZero() && !d.v.badPath(path) {
				d.zeros = append(d.zeros, zeroValue{path: path, line: line(n), rv: rv})
			}
		}()
	}
	switch {
	case rv.Kind() == reflect.Pointer:
		p := reflect.New(rv.Type().Elem())
		d.decode(n, p.Elem(), path)
		rv.Set(p)
	case rv.Type() == durationType:
		d.duration(n, rv, path)
	case rv.Kind() == reflect.Struct:
		d.mapping(n, rv, path)
	case rv.Kind() == reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.problem(path, n, "want a list, got %s", kindOf(n))
			return
		}
		s := reflect.MakeSlice(rv.Type(), len(seq.Values), len(seq.Values))
		for i, e := range seq.Values {
			d.decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		rv.Set(s)
	case rv.Kind() == reflect.String:
		s, ok := scalarText(n)
		if !ok {
			d.problem(path, n, "want a string, got %s", kindOf(n))
			return
		}
		if err := checkText(s); err != nil {
			d.problem(path, n, "%s: %v", excerpt(s), err)
			return
		}
		rv.SetString(s)
	case rv.Kind() == reflect.Int:
		in, ok := n.(*ast.IntegerNode)
		if !ok {
			d.problem(path, n, "want an integer, got %s", kindOf(n))
			return
		}
		var i int64
		switch x := in.Value.(type) {
		case int64:
			i = x
		case uint64:
			if x > math.MaxInt64 {
				d.problem(path, n, "%s is too large", excerpt(in.GetToken().Value))
				return
			}
			i = int64(x)
		}
		if i != int64(int(i)) {
			d.problem(path, n, "%s is too large", excerpt(in.GetToken().Value))
			return
		}
		rv.SetInt(i)
	case rv.Kind() == reflect.Float64:
		var f float64
		switch x := n.(type) {
		case *ast.FloatNode:
			f = x.Value
		case *ast.IntegerNode:
			switch iv := x.Value.(type) {
			case int64:
				f = float64(iv)
			case uint64:
				f = float64(iv)
			}
		case *ast.NanNode, *ast.InfinityNode:
			d.problem(path, n, "want a finite number, got %s", kindOf(n))
			return
		default:
			d.problem(path, n, "want a number, got %s", kindOf(n))
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.problem(path, n, "want a finite number, got %v", f)
			return
		}
		rv.SetFloat(f)
	case rv.Kind() == reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.problem(path, n, "want true or false, got %s", kindOf(n))
			return
		}
		rv.SetBool(b.Value)
	default:
		d.problem(path, n, "unsupported field type %s", rv.Type())
	}
}

// mapping decodes a mapping onto struct rv by its fields' yaml tags.
func (d *decoder) mapping(n ast.Node, rv reflect.Value, path string) {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		d.problem(path, n, "want a mapping of keys, got %s", kindOf(n))
		return
	}
	fields := map[string]int{}
	var names []string
	for i := range rv.NumField() {
		tag, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	seen := map[string]int{}
	for _, mv := range m.Values {
		key, ok := scalarText(mv.Key)
		kp := joinPath(path, pathKey(key))
		if !ok || checkText(key) != nil {
			d.problem(joinPath(path, "?"), mv.Key, "a key must be a plain name, got %s", kindOf(mv.Key))
			continue
		}
		if first, dup := seen[key]; dup {
			d.problem(kp, mv.Key, "duplicate key (first at line %d)", first)
			continue
		}
		seen[key] = line(mv.Key)
		i, ok := fields[key]
		if !ok {
			msg := "unknown key " + excerpt(key)
			if len(names) <= 16 {
				msg += " (want one of " + strings.Join(names, ", ") + ")"
			}
			d.problem(kp, mv.Key, "%s", msg)
			continue
		}
		d.decode(mv.Value, rv.Field(i), kp)
	}
}

func (d *decoder) duration(n ast.Node, rv reflect.Value, path string) {
	s, ok := scalarText(n)
	if !ok {
		d.problem(path, n, "want a duration such as 500ms, 30s, 5m or 1h, got %s", kindOf(n))
		return
	}
	if _, isInt := n.(*ast.IntegerNode); isInt && s == "0" {
		rv.SetInt(0)
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.problem(path, n, "%s is not a duration: want e.g. 500ms, 30s, 5m or 1h", excerpt(s))
		return
	}
	rv.SetInt(int64(dur))
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// pathKey is how a key appears in a path: as itself when it is a plain
// name, else as a short quoted excerpt.
func pathKey(key string) string {
	if plainKey.MatchString(key) {
		return key
	}
	return excerpt(key)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// scalarText returns the text of a scalar node as written (a number is
// kept as its digits, so a state named 200 is "200").
func scalarText(n ast.Node) (string, bool) {
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.LiteralNode:
		return x.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return x.GetToken().Value, true
	}
	return "", false
}

func kindOf(n ast.Node) string {
	switch x := n.(type) {
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(x)
		return "the string " + excerpt(s)
	case *ast.IntegerNode, *ast.FloatNode:
		return "the number " + excerpt(x.GetToken().Value)
	case *ast.BoolNode:
		return "the boolean " + x.GetToken().Value
	case *ast.NanNode, *ast.InfinityNode:
		return excerpt(x.GetToken().Value)
	case *ast.NullNode:
		return "null"
	case nil:
		return "nothing"
	}
	return strings.ToLower(strings.TrimSuffix(n.Type().String(), "Type"))
}

// errControl refuses control characters: a configuration string never
// needs them.
var errControl = errors.New("contains a control character")

// checkText refuses strings no configuration value needs: invalid UTF-8,
// control characters (NUL, escape, newline...) and huge values.
func checkText(s string) error {
	if len(s) > maxString {
		return fmt.Errorf("longer than %d bytes", maxString)
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }); i >= 0 {
		return fmt.Errorf("%w (%U at byte %d)", errControl, []rune(s[i:])[0], i)
	}
	return nil
}

// badPath reports whether a decoding problem was already recorded at path
// or above it: validation then says nothing more about it.
func (v *validator) badPath(path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if v.bad[p] {
			return true
		}
	}
	return false
}
