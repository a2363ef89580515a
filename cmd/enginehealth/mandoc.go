package main

import (
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manDate is the date the man pages carry: fixed, so that generating them
// again changes nothing unless the commands did.
var manDate = time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)

// writeManPages writes a man page per command (section 1, from the
// commands' own help) into dir: enginehealth.1, enginehealth-status.1…
// The packages install them; TestManPagesFresh fails when those in
// docs/man are stale.
func writeManPages(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := newRoot(io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	disableAutoGenTag(root)
	return doc.GenManTreeFromOpts(root, doc.GenManTreeOptions{
		Path:             filepath.Clean(dir),
		CommandSeparator: "-",
		// No Title: each page is titled by its command (ENGINEHEALTH-STATUS).
		Header: &doc.GenManHeader{
			Section: "1",
			Date:    &manDate,
			Source:  "enginehealth",
			Manual:  "enginehealth manual",
		},
	})
}

// writeMarkdown writes a Markdown page per command (from the same help)
// into dir: enginehealth.md, enginehealth_status.md…, each linking its
// parent and subcommands. docs/cli.md links them; TestCLIPagesFresh fails
// when those in docs/cli are stale.
func writeMarkdown(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := newRoot(io.Discard, io.Discard)
	disableAutoGenTag(root)
	return doc.GenMarkdownTree(root, filepath.Clean(dir))
}

func disableAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, s := range c.Commands() {
		disableAutoGenTag(s)
	}
}
