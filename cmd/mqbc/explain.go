package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mqb-dev/mqb/diag"
)

func init() {
	register(&command{
		Name:    "explain",
		Usage:   "mqbc explain [CODE]",
		Summary: "explain a diagnostic code such as E012 (no code: list them all)",
		Run:     runExplain,
	})
}

func runExplain(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		for _, c := range diag.Codes {
			fmt.Fprintf(stdout, "%s  %s\n", c.Code, c.Title)
		}
		return exitOK
	case 1:
	default:
		fmt.Fprintln(stderr, "usage: "+commands["explain"].Usage)
		return exitUsage
	}
	c, ok := diag.Lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "mqbc explain: no diagnostic code %q; `mqbc explain` lists them\n", args[0])
		return exitUsage
	}
	fmt.Fprintf(stdout, "%s: %s (%s)\n\n%s\n", c.Code, c.Title, diag.SeverityOf(c.Code), c.Doc)
	if c.Example != "" {
		fmt.Fprintln(stdout, "\nExample:")
		for _, l := range strings.Split(c.Example, "\n") {
			fmt.Fprintln(stdout, "    "+l)
		}
	}
	return exitOK
}
