package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// What the edge of the API accepts. Everything a request carries is
// checked here, before any database call: names against the node naming
// rule, text for UTF-8 and control characters, bodies for size, type and
// shape.
const (
	// requestIDHeader carries a request's id, answered with every
	// response and logged with every line about the request.
	requestIDHeader = "X-Request-Id"
	// maxRequestID is the longest incoming request id taken as is.
	maxRequestID = 64
	// maxBody is the largest request body, in bytes.
	maxBody = 64 << 10
	// maxReason is the longest ack reason, in bytes.
	maxReason = 1000
	// defaultLongTimeout bounds POST /v1/check and /v1/recovery: above
	// the CLI's 10 minutes, so the server never cuts first.
	defaultLongTimeout = 11 * time.Minute
)

type requestIDKey struct{}

// requestID returns the id of the request ctx belongs to.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// validRequestID reports whether an incoming id is taken as is: 1 to 64
// ASCII letters, digits, '.', '_' or '-'.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// edge wraps the routes: it gives each request its id (a well-formed
// incoming X-Request-Id, else a new one), and closes the connection
// instead of waiting for a request body the handler did not read.
func (h *handler) edge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(requestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		ew := &edgeWriter{ResponseWriter: w}
		if h.cfg.Requests != nil {
			defer func() { h.cfg.Requests(r.Pattern, cmp.Or(ew.code, http.StatusOK)) }()
		}
		// Answer malformed targets here, in the API's error shape, before
		// the mux would redirect them (307, text/html) or pick one of
		// several values.
		if !canonicalPath(r.URL.Path) {
			h.problem(ew, r, http.StatusBadRequest, "path: not in canonical form",
				"got "+quoteShort(r.URL.Path)+"; no empty, . or .. segments")
			return
		}
		// An encoded slash would be a separator to the mux (which routes
		// on the escaped path) and part of a name to the handler: refuse
		// it rather than guess. An id with a slash is written as is, as
		// the last segments of /v1/instances/{workflow}/{id}.
		if p := r.URL.EscapedPath(); strings.Contains(strings.ToUpper(p), "%2F") {
			h.problem(ew, r, http.StatusBadRequest, "path: an encoded slash (%2F)",
				"got "+quoteShort(p)+"; write a slash as /")
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			h.problem(ew, r, http.StatusBadRequest, "query: malformed", "got "+quoteShort(r.URL.RawQuery))
			return
		}
		for k, vs := range q {
			if len(vs) > 1 {
				h.problem(ew, r, http.StatusBadRequest, "query parameter "+quoteShort(k)+": given more than once", "")
				return
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			ew.body = &eofBody{ReadCloser: r.Body}
			r.Body = ew.body
		}
		next.ServeHTTP(ew, r)
	})
}

// canonicalPath reports whether p is an absolute path without empty, "."
// or ".." segments (a trailing slash is allowed).
func canonicalPath(p string) bool {
	c := path.Clean(p)
	if p != "/" && strings.HasSuffix(p, "/") {
		c += "/"
	}
	return strings.HasPrefix(p, "/") && c == p
}

// eofBody records whether a request body was read to its end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// edgeWriter answers with "Connection: close", and stops reading, when
// the request body was not read to its end: net/http would otherwise
// read up to 256 KiB of it after the answer, waiting for a lying
// Content-Length until the read timeout while the connection counts
// against the cap.
type edgeWriter struct {
	http.ResponseWriter
	body  *eofBody
	wrote bool
	code  int
}

func (w *edgeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote, w.code = true, code
		if w.body != nil && !w.body.eof {
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Now())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *edgeWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *edgeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// reqLog returns the handler's logger for request r: with its request
// id, and the operator who sent it once authenticated.
func (h *handler) reqLog(r *http.Request) *slog.Logger {
	log := h.log.With("request_id", requestID(r.Context()))
	if id, ok := identityOf(r.Context()); ok {
		log = log.With("operator", id.Name)
	}
	return log
}

// extendDeadlines gives a long-running route (a check or recovery run,
// possibly forwarded) Config.LongTimeout to finish and answer, past the
// server's read and write timeouts. The read deadline matters too: once
// the body is read, net/http keeps reading the connection to notice a
// client that goes away, and cancels the request's context when that
// read fails, deadline included.
func (h *handler) extendDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	d := time.Now().Add(h.cfg.LongTimeout)
	_ = rc.SetReadDeadline(d)
	_ = rc.SetWriteDeadline(d)
}

// drainTooLarge is how much more of a body over maxBody is read before the
// 413 is sent (the connection is closed after it).
const drainTooLarge = 1 << 20

// decodeBody reads the request's JSON body into v, strictly, and returns
// it (to forward). An empty body leaves v as it is. It answers the
// request itself and returns false when the body is refused: 415 for a
// Content-Type other than application/json, 413 above 64 KiB, 408 when it
// does not arrive within the server's read timeout, 400 when it is not
// valid UTF-8, not one JSON value of v's shape (unknown fields included),
// or followed by more data.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" && r.ContentLength != 0 {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeProblem(w, http.StatusUnsupportedMediaType, "body: want Content-Type application/json", "got "+quoteShort(ct))
			return nil, false
		}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		// Read on a little (up to drainTooLarge), so that a client still
		// sending a body somewhat too large reads the 413 rather than a
		// connection reset by the close that follows it.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, drainTooLarge))
		writeProblem(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: larger than %d bytes", tooLarge.Limit), "")
		return nil, false
	case errors.Is(err, os.ErrDeadlineExceeded):
		writeProblem(w, http.StatusRequestTimeout, "body: not received within the read timeout",
			fmt.Sprintf("got %d bytes; Content-Length said %d", len(b), r.ContentLength))
		return nil, false
	case err != nil:
		writeProblem(w, http.StatusBadRequest, "body: could not be read", "")
		return nil, false
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return b, true
	}
	if !utf8.Valid(b) {
		writeProblem(w, http.StatusBadRequest, "body: not valid UTF-8", "")
		return nil, false
	}
	if p := keyProblem(b, v); p != "" {
		writeProblem(w, http.StatusBadRequest, p, "")
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeProblem(w, http.StatusBadRequest, jsonProblem(err), "")
		return nil, false
	}
	if rest := bytes.TrimSpace(b[dec.InputOffset():]); len(rest) > 0 {
		writeProblem(w, http.StatusBadRequest, "body: unexpected data after the JSON value",
			fmt.Sprintf("one JSON value only; more data starts at byte %d", len(b)-len(rest)))
		return nil, false
	}
	return b, true
}

// keyProblem checks what encoding/json lets through, in the body and in
// every object inside it (the instances of a holds request): the body
// must be an object (not null), and each key of an object must be given
// once, spelt exactly as one of its type's json field names
// (encoding/json would also take "REASON" for "reason", and let the last
// of two keys win: {"instance": "105", "INSTANCE": "106"} decided 106),
// with a value other than null (which encoding/json takes as the field
// left out), but for a list, whose null is empty; nor may an element of
// a list be null. It returns "" when the keys are fine, or when the body
// is not of v's shape at all (the decoder then says what is wrong).
func keyProblem(b []byte, v any) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return ""
	}
	if tok == nil {
		return "body: want an object, got null"
	}
	return valueProblem(dec, tok, reflect.TypeOf(v).Elem(), "body")
}

// valueProblem checks the JSON value that starts with tok (read from
// dec, which it reads to the value's end) against type t, at path.
func valueProblem(dec *json.Decoder, tok json.Token, t reflect.Type, path string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case tok == json.Delim('{') && t.Kind() == reflect.Struct:
		return objectProblem(dec, t, path)
	case tok == json.Delim('[') && t.Kind() == reflect.Slice:
		for i := 0; dec.More(); i++ {
			el, err := dec.Token()
			if err != nil {
				return ""
			}
			at := fmt.Sprintf("%s[%d]", path, i)
			if el == nil {
				return at + ": null: give a value"
			}
			if p := valueProblem(dec, el, t.Elem(), at); p != "" {
				return p
			}
		}
		_, _ = dec.Token() // ]
	case tok == json.Delim('{') || tok == json.Delim('['):
		// Not of t's shape: skipped, for the decoder to say.
		for depth := 1; depth > 0; {
			tk, err := dec.Token()
			if err != nil {
				return ""
			}
			switch tk {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
	}
	return ""
}

// objectProblem checks an object's keys and values against struct t, its
// opening brace read.
func objectProblem(dec *json.Decoder, t reflect.Type, path string) string {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" {
			fields[n] = t.Field(i).Type
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := tok.(string)
		ft, known := fields[k]
		switch {
		case seen[k]:
			return path + ": field " + quoteShort(k) + " given more than once"
		case !known:
			return path + ": unknown field " + quoteShort(k)
		}
		seen[k] = true
		val, err := dec.Token()
		if err != nil {
			return ""
		}
		// encoding/json leaves a field given as null as it was: for
		// {"dry_run": null}, a run that is not dry. A list's null is
		// the empty list (what Go clients send for none).
		if val == nil {
			if ft.Kind() == reflect.Slice {
				continue
			}
			return path + ": field " + quoteShort(k) + " is null: give it a value, or leave it out"
		}
		if p := valueProblem(dec, val, ft, path+"."+k); p != "" {
			return p
		}
	}
	_, _ = dec.Token() // }
	return ""
}

// jsonProblem says what is wrong with a body that does not decode,
// naming the field when it can.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := "body"
		if typeErr.Field != "" {
			field += "." + typeErr.Field
		}
		return fmt.Sprintf("%s: want %s, got %s", field, jsonKind(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("body: not valid JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "body: truncated JSON"
	default:
		// Unknown fields: `json: unknown field "x"`.
		return "body: " + strings.TrimPrefix(err.Error(), "json: ")
	}
}

// jsonKind names a Go type as the JSON a client should send.
func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "float"):
		return "a number"
	default:
		return "an object"
	}
}

// textProblem says why s is not acceptable as stored text of at most limit
// bytes ("" when it is): it must be valid UTF-8 without control
// characters (see unsafeRune).
func textProblem(s string, limit int) string {
	if !utf8.ValidString(s) {
		return "not valid UTF-8"
	}
	if len(s) > limit {
		return fmt.Sprintf("%d bytes, longer than %d", len(s), limit)
	}
	for i, r := range s {
		if unsafeRune(r) {
			return fmt.Sprintf("control or invisible character %U at byte %d", r, i)
		}
	}
	return ""
}

// unsafeRune reports whether r must not reach a terminal as is: C0 and C1
// control characters (newline and tab included), Unicode format
// characters but the zero-width joiners, and line and paragraph
// separators.
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u200C' || r == '\u200D':
		// Zero-width (non-)joiners: part of how several scripts and emoji
		// are written; they neither move nor hide other text.
		return false
	}
	// Format characters (bidirectional marks, overrides and isolates,
	// zero-width space, byte order mark, soft hyphen, tags...) and the
	// line and paragraph separators: invisible, or they reorder or break
	// what is shown.
	return unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// TerminalSafe returns s with every unsafe rune (control characters,
// bidirectional overrides) and every byte of invalid UTF-8 written as a Go
// escape (\n, \x1b, \u202e, \xff), for printing text that came from the
// daemon on a terminal. Other text, backslashes included, is unchanged.
func TerminalSafe(s string) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\n', '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// quoteShort quotes s, escaped and cut to 64 bytes, to show in an error.
func quoteShort(s string) string {
	const maxLen = 64
	if len(s) <= maxLen {
		return strconv.QuoteToASCII(s)
	}
	return strconv.QuoteToASCII(s[:maxLen]) + fmt.Sprintf("... (%d bytes)", len(s))
}
