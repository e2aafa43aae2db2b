package main

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

func init() {
	register(&command{
		Name:    "version",
		Usage:   "mqbc version",
		Summary: "print mqbc's version: the module version, the commit it was built from, and the Go release",
		Run:     runVersion,
	})
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: mqbc version")
		return exitUsage
	}
	fmt.Fprintln(stdout, versionLine())
	return exitOK
}

// versionLine is `mqbc v1.2.3, commit 0123abcd4567, go1.26.0`; a build
// from a work tree says (devel), one with uncommitted changes says so.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "mqbc (no build information)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " with uncommitted changes"
			}
		}
	}
	parts := []string{"mqbc " + version}
	if rev != "" {
		parts = append(parts, "commit "+rev[:min(12, len(rev))]+modified)
	}
	parts = append(parts, bi.GoVersion)
	return strings.Join(parts, ", ")
}
