package docs_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAnchor: GitHub's anchors of headings with code, punctuation,
// links, emphasis, entities and non-ASCII letters.
func TestAnchor(t *testing.T) {
	cases := []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"`user:password@` in an endpoint", "userpassword-in-an-endpoint"},
		{"The claim protocol (what engines must do)", "the-claim-protocol-what-engines-must-do"},
		{"Walk-through: TLS everywhere", "walk-through-tls-everywhere"},
		{"What `make bench` measures", "what-make-bench-measures"},
		{"GET /v1/nodes/{name}", "get-v1nodesname"},
		{"Version 1.2 — notes", "version-12--notes"},
		{"a/b.c", "abc"},
		{"`etcd.tls.ca_file` and `api.tls.*`", "etcdtlsca_file-and-apitls"},
		{"[The master](design.md#the-master), again", "the-master-again"},
		{"*Emphasis* and __strong__ and snake_case_key", "emphasis-and-strong-and-snake_case_key"},
		{"A &amp; B", "a--b"},
		{"Ünïcödé Straße", "ünïcödé-straße"},
		{"CheckEngineHealth", "checkenginehealth"},
		{"Don't panic!", "dont-panic"},
		{"  Spaces around  ", "spaces-around"},
		{"Two  spaces", "two--spaces"},
		{"<code>html</code> tags", "html-tags"},
		{"Escaped \\_underscores\\_", "escaped-_underscores_"},
	}
	for _, c := range cases {
		if got := anchor(c.heading); got != c.want {
			t.Errorf("anchor(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

// TestPageAnchors: duplicate headings get -1, -2; headings in fenced
// code blocks and closing hashes do not count.
func TestPageAnchors(t *testing.T) {
	md := "# Title\n\n## Example\n\ntext\n\n## Example\n\n```sh\n# not a heading\n```\n\n" +
		"  ```\n  ## nor this, in a list's code block\n  ```\n\n### Example ###\n\n#no space is no heading\n\n<a id=\"custom\"></a>\n"
	got := pageAnchors(md)
	for _, want := range []string{"title", "example", "example-1", "example-2", "custom"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	for _, not := range []string{"not-a-heading", "nor-this-in-a-lists-code-block", "no-space-is-no-heading", "example-3"} {
		if got[not] {
			t.Errorf("anchor %q should not be there: %v", not, got)
		}
	}
}

// TestCheckLinksFailsOnBrokenLinks: the checker reports a missing file, a
// missing anchor in another page and in the same page, and a path out of
// the repository; it ignores URLs and links in code.
func TestCheckLinksFailsOnBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module x\n")
	write("README.md", "# X\n\nSee [a](docs/a.md#first-part) and [config](configs/x.yaml), [web](https://example.com/nope.md).\n")
	write("configs/x.yaml", "a: 1\n")
	write("docs/b.md", "# B\n\n## `user:password@` in an endpoint\n")
	write("docs/a.md", "# A\n\n## First part\n\n"+
		"[ok](b.md#userpassword-in-an-endpoint), [ok too](#first-part), [dir](../configs/), [up](../README.md#y)\n\n"+
		"[missing file](nope.md) and [missing anchor](b.md#user-password-in-an-endpoint)\n"+
		"and [missing here](#second-part), [out](../../etc/passwd), [abs](/README.md)\n\n"+
		"`[in code](nope.md)` and ``[in `code` too](nope.md)``\n\n```\n[in a block](nope.md)\n```\n\n"+
		"[ref]: nowhere.md\n")
	got := checkLinks(root, []string{"README.md", "docs/a.md", "docs/b.md"})
	want := []string{
		"docs/a.md:5: (../README.md#y): no heading of README.md makes the anchor #y",
		"docs/a.md:7: (nope.md): no file docs/nope.md in the repository",
		"docs/a.md:7: (b.md#user-password-in-an-endpoint): no heading of docs/b.md makes the anchor #user-password-in-an-endpoint",
		"docs/a.md:8: (#second-part): no heading of docs/a.md makes the anchor #second-part",
		"docs/a.md:8: (../../etc/passwd): outside the repository",
		"docs/a.md:8: (/README.md): an absolute path: write it relative to docs/a.md",
		"docs/a.md:16: (nowhere.md): no file docs/nowhere.md in the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
