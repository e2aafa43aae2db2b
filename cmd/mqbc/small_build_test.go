package main

import (
	"strings"
	"testing"
)

// TestBuildTruncatedFile: a file that ends before its closing `}` (with or
// without a final newline) is a syntax error with a caret, exit 1 — the
// renderer used to panic on it (exit 2, a Go stack trace).
func TestBuildTruncatedFile(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"no final newline", "route r {\n  from file { path = \"a.jsonl\" }\n  to file { path = \"b\"",
			"t.mqb:3:23: error[E001]: the file ends before a block is closed: expected \"}\"\n 3 |   to file { path = \"b\"\n   |                       ^\n"},
		{"final newline", "route r {\n  from file { path = \"a.jsonl\" }\n  to file { path = \"b\" }\n",
			"t.mqb:4:1: error[E001]: the file ends before a block is closed: expected \"}\"\n 4 | \n   | ^\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "t.mqb", tc.src)
			_, errs, code := mqbc(t, dir, "build", "t.mqb")
			if code != exitError || errs != tc.want || strings.Contains(errs, "panic") {
				t.Errorf("exit %d, stderr\n%s\nwant exit 1 and\n%s", code, errs, tc.want)
			}
		})
	}
}
