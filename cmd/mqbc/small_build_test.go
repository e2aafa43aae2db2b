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

// TestBuildTooLarge: a file over the build's byte bound is refused with
// E003 at once (not read whole, not lexed); so are files that are over it
// together.
func TestBuildTooLarge(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("# generated\n", (16<<20)/12+1)
	write(t, dir, "big.mqb", big)
	_, errs, code := mqbc(t, dir, "build", "big.mqb")
	want := "big.mqb:1:1: error[E003]: the build's files hold more than 16 MiB of source (big.mqb brings it over); one build accepts at most 16 MiB\n"
	if code != exitError || !strings.HasPrefix(errs, want) {
		t.Errorf("exit %d, stderr\n%s\nwant exit 1 and prefix\n%s", code, errs, want)
	}
	half := strings.Repeat("# generated\n", (9<<20)/12)
	write(t, dir, "a.mqb", half)
	write(t, dir, "b.mqb", half)
	_, errs, code = mqbc(t, dir, "build", "a.mqb", "b.mqb")
	if code != exitError || !strings.HasPrefix(errs, "b.mqb:1:1: error[E003]:") {
		t.Errorf("two files: exit %d, stderr\n%s", code, errs)
	}
}
