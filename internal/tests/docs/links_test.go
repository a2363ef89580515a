package docs_test

import (
	"fmt"
	"html"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines: README.md says what the project is and how to start;
// everything else has its page under docs/.
const maxReadmeLines = 200

// TestLinks fails on a relative link of README.md, ARCHITECTURE.md or
// docs/*.md that points at no file of the repository, and on an anchor
// (#…, in the same page or another .md page) that no heading of that page
// makes, by GitHub's rules.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	pages := docPages(t, root)
	if len(pages) < 10 {
		t.Fatalf("found %d pages: %v", len(pages), pages)
	}
	for _, p := range checkLinks(root, pages) {
		t.Error(p)
	}
}

// TestReadmeIsShort: README.md has at most maxReadmeLines lines.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to a page under docs/", n, maxReadmeLines)
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("not the repository's root: %v", err)
	}
	return root
}

// docPages: the pages checked, relative to root, with slashes.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages := []string{"README.md", "ARCHITECTURE.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		rel, err := filepath.Rel(root, m)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

// checkLinks returns one line per broken link of the pages (paths
// relative to root, with slashes).
func checkLinks(root string, pages []string) []string {
	var problems []string
	anchorsOf := map[string]map[string]bool{} // page → its anchors
	anchors := func(page string) (map[string]bool, error) {
		if a, ok := anchorsOf[page]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			return nil, err
		}
		a := pageAnchors(string(b))
		anchorsOf[page] = a
		return a, nil
	}
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", page, err))
			continue
		}
		for _, l := range pageLinks(string(b)) {
			if err := checkLink(root, page, l.target, anchors); err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: (%s): %v", page, l.line, l.target, err))
			}
		}
	}
	return problems
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// checkLink says what is wrong with one link target of page (nil when
// nothing is, or when it is not relative: a URL with a scheme).
func checkLink(root, page, target string, anchors func(string) (map[string]bool, error)) error {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return nil
	}
	file, frag, _ := strings.Cut(target, "#")
	dest := page
	if file != "" {
		p, err := url.PathUnescape(file)
		if err != nil {
			return fmt.Errorf("bad path: %v", err)
		}
		if strings.HasPrefix(p, "/") {
			return fmt.Errorf("an absolute path: write it relative to %s", page)
		}
		dest = path.Clean(path.Join(path.Dir(page), p))
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Errorf("outside the repository")
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return fmt.Errorf("no file %s in the repository", dest)
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return nil // GitHub's anchors of other files (#L10) are not headings
	}
	a, err := anchors(dest)
	if err != nil {
		return err
	}
	if !a[frag] {
		return fmt.Errorf("no heading of %s makes the anchor #%s", dest, frag)
	}
	return nil
}

type link struct {
	line   int
	target string
}

var (
	fence      = regexp.MustCompile("^ *(```+|~~~+)")
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
)

// pageLinks returns the link targets of a page, outside code blocks and
// code spans, with their lines.
func pageLinks(md string) []link {
	var out []link
	for _, b := range blocks(md) {
		text := blankCode(b.text)
		for _, re := range []*regexp.Regexp{inlineLink, refDef} {
			for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
				out = append(out, link{line: b.line + strings.Count(text[:m[0]], "\n"), target: text[m[2]:m[3]]})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b link) int { return a.line - b.line })
	return out
}

type block struct {
	line int // of its first line, from 1
	text string
}

// blocks splits a page into runs of non-blank lines outside fenced code
// blocks (code spans may wrap from one line to the next).
func blocks(md string) []block {
	var out []block
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, block{line: start, text: strings.Join(cur, "\n")})
			cur = nil
		}
	}
	prose(md, flush, func(i int, line string) {
		if strings.TrimSpace(line) == "" {
			flush()
			return
		}
		if len(cur) == 0 {
			start = i + 1
		}
		cur = append(cur, line)
	})
	flush()
	return out
}

// prose calls line for each line of a page outside fenced code blocks
// (i: its index), and fenceOpens where such a block begins.
func prose(md string, fenceOpens func(), line func(i int, s string)) {
	inFence := ""
	for i, l := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		if inFence != "" {
			if strings.HasPrefix(trimmed, inFence) && strings.TrimRight(strings.TrimLeft(trimmed, inFence[:1]), " ") == "" {
				inFence = ""
			}
			continue
		}
		if m := fence.FindStringSubmatch(l); m != nil {
			fenceOpens()
			inFence = m[1]
			continue
		}
		line(i, l)
	}
}

// codeSpans returns the [start, end) of each code span of text: a run
// of n backticks up to the next run of exactly n.
func codeSpans(text string) [][2]int {
	var spans [][2]int
	i := 0
	for i < len(text) {
		if text[i] == '\\' && i+1 < len(text) {
			i += 2
			continue
		}
		if text[i] != '`' {
			i++
			continue
		}
		n := run(text, i)
		closed := false
		for j := i + n; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			m := run(text, j)
			if m == n {
				spans = append(spans, [2]int{i, j + m})
				i, closed = j+m, true
				break
			}
			j += m
		}
		if !closed {
			i += n // literal backticks
		}
	}
	return spans
}

func run(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// blankCode replaces the code spans of text by spaces, keeping its
// newlines and offsets.
func blankCode(text string) string {
	b := []byte(text)
	for _, s := range codeSpans(text) {
		for k := s[0]; k < s[1]; k++ {
			if b[k] != '\n' {
				b[k] = ' '
			}
		}
	}
	return string(b)
}

var (
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// pageAnchors returns the anchors a page has: one per heading, as GitHub
// makes them (duplicates get -1, -2, …), and the names of <a id> and
// <a name> tags.
func pageAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	prose(md, func() {}, func(_ int, line string) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(blankCode(line), -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		a := anchor(m[2])
		n := seen[a]
		seen[a]++
		if n > 0 {
			a = fmt.Sprintf("%s-%d", a, n)
		}
		anchors[a] = true
	})
	return anchors
}

// anchor is GitHub's anchor of a heading written as md: the heading's
// text as rendered (code spans' content, links' text, no emphasis
// markers, no HTML tags), lowercased, every character removed but
// letters, marks, digits, connector punctuation (the underscore), hyphens
// and spaces, and every space made a hyphen.
func anchor(md string) string {
	s := strings.ToLower(headingText(md))
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-', unicode.IsLetter(r), unicode.Is(unicode.M, r), unicode.Is(unicode.Nd, r), unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	image     = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	linkText  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	autolink  = regexp.MustCompile(`<((?:https?|mailto):[^>]*)>`)
	htmlTag   = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
	escaped   = regexp.MustCompile(`\\([!-/:-@\[-` + "`" + `{-~])`)
	emphUnder = regexp.MustCompile(`(^|[^\pL\pN])_+|_+([^\pL\pN]|$)`)
)

// headingText renders the inline Markdown of a heading as text.
func headingText(md string) string {
	md = strings.TrimSpace(md)
	var b strings.Builder
	last := 0
	for _, s := range codeSpans(md) {
		b.WriteString(inlineText(md[last:s[0]]))
		n := run(md, s[0])
		code := md[s[0]+n : s[1]-n]
		if len(code) > 1 && code[0] == ' ' && code[len(code)-1] == ' ' && strings.Trim(code, " ") != "" {
			code = code[1 : len(code)-1]
		}
		b.WriteString(code)
		last = s[1]
	}
	b.WriteString(inlineText(md[last:]))
	return strings.TrimSpace(b.String())
}

// inlineText renders Markdown without code spans as text.
func inlineText(s string) string {
	s = image.ReplaceAllString(s, "$1")
	s = linkText.ReplaceAllString(s, "$1")
	s = autolink.ReplaceAllString(s, "$1")
	s = htmlTag.ReplaceAllString(s, "")
	// Escaped characters are literal: kept apart from emphasis markers
	// (in the private use area) until those are gone.
	s = escaped.ReplaceAllStringFunc(s, func(m string) string { return string(rune(0xE000) + rune(m[1])) })
	s = emphUnder.ReplaceAllStringFunc(s, func(m string) string { return strings.ReplaceAll(m, "_", "") })
	s = strings.Map(func(r rune) rune {
		if r >= 0xE000 && r < 0xE080 {
			return r - 0xE000
		}
		return r
	}, s)
	return html.UnescapeString(s)
}
