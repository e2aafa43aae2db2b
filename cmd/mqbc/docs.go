package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mqb-dev/mqb/docs/reference"
)

func init() {
	register(&command{
		Name:    "docs",
		Usage:   "mqbc docs [-o DIR]",
		Summary: "write the language reference (kinds, steps, attributes, settings, diagnostic codes) as markdown",
		Run:     runDocs,
	})
}

func runDocs(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(commands["docs"], stderr)
	dir := fs.String("o", "", "write DIR/reference.md instead of printing to stdout")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return exitUsage
	}
	if len(rest) > 0 {
		fs.Usage()
		return exitUsage
	}
	md := reference.Markdown()
	if *dir == "" {
		if _, err := stdout.Write(md); err != nil {
			fmt.Fprintf(stderr, "mqbc docs: %v\n", err)
			return exitError
		}
		return exitOK
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "mqbc docs: %v\n", err)
		return exitError
	}
	path := filepath.Join(*dir, "reference.md")
	if err := os.WriteFile(path, md, 0o644); err != nil {
		fmt.Fprintf(stderr, "mqbc docs: write %s: %v\n", path, err)
		return exitError
	}
	fmt.Fprintln(stdout, path)
	return exitOK
}
