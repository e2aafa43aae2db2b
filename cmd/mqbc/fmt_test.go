package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFmtCommand(t *testing.T) {
	const messy = "route r {\nfrom file {path=\"a\"}  # src\n  to file { path = \"b\" }\n}\n"
	const clean = "route r {\n  from file { path = \"a\" }  # src\n  to file { path = \"b\" }\n}\n"
	const broken = "route r {\n  from file { path = \"a\" mode = consume }\n}\n"
	tests := []struct {
		name     string
		args     []string // FILE is replaced by the temp file
		src      string
		code     int
		stdout   string
		stderr   string // substring
		fileWant string // file content afterwards
	}{
		{"print", []string{"FILE"}, messy, exitOK, clean, "", messy},
		{"list changed", []string{"-l", "FILE"}, messy, exitOK, "FILE\n", "", messy},
		{"list clean", []string{"-l", "FILE"}, clean, exitOK, "", "", clean},
		{"write", []string{"-w", "FILE"}, messy, exitOK, "", "", clean},
		{"write and list", []string{"FILE", "-w", "-l"}, messy, exitOK, "FILE\n", "", clean},
		{"syntax error", []string{"-w", "FILE"}, broken, exitError, "", `error[E001]: expected a newline or a comma before "mode"`, broken},
		{"no files", nil, "", exitUsage, "", "usage: mqbc fmt", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "p.mqb")
			if err := os.WriteFile(path, []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"fmt"}
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "FILE", path))
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %s)", code, tt.code, stderr.String())
			}
			if want := strings.ReplaceAll(tt.stdout, "FILE", path); stdout.String() != want {
				t.Errorf("stdout = %q, want %q", stdout.String(), want)
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.stderr)
			}
			if tt.args != nil {
				got, _ := os.ReadFile(path)
				if string(got) != tt.fileWant {
					t.Errorf("file = %q, want %q", got, tt.fileWant)
				}
			}
		})
	}
}

// TestExamplesFormatted keeps examples/ in the canonical layout.
func TestExamplesFormatted(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"fmt", "-l", "../../examples"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stdout.Len() > 0 {
		t.Errorf("not formatted (run mqbc fmt -w examples):\n%s", stdout.String())
	}
}
