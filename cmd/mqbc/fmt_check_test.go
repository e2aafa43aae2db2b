package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFmtCheckBinary runs the real binary: `-l` lists unformatted files and
// exits 0 (gofmt's convention); `--check` lists the same files and exits 1
// when there is one, so CI can gate on it; neither rewrites anything.
func TestFmtCheckBinary(t *testing.T) {
	const messy = "route r {\nfrom file {path=\"a\"}\n  to file { path = \"b\" }\n}\n"
	const clean = "route r {\n  from file { path = \"a\" }\n  to file { path = \"b\" }\n}\n"
	dir := t.TempDir()
	write(t, dir, "clean.mqb", clean)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "sub/messy.mqb", messy)
	messyPath := filepath.Join("sub", "messy.mqb")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string // substring
	}{
		{"list keeps exit 0", []string{"fmt", "-l", "."}, exitOK, messyPath + "\n", ""},
		{"check fails on an unformatted file", []string{"fmt", "--check", "."}, exitError, messyPath + "\n", ""},
		{"check with one dash", []string{"fmt", "-check", messyPath}, exitError, messyPath + "\n", ""},
		{"check passes on formatted files", []string{"fmt", "--check", "clean.mqb"}, exitOK, "", ""},
		{"check and list", []string{"fmt", "--check", "-l", "clean.mqb", messyPath}, exitError, messyPath + "\n", ""},
		{"check refuses -w", []string{"fmt", "--check", "-w", "."}, exitUsage, "", "--check only reports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := mqbc(t, dir, tc.args...)
			if code != tc.code || out != tc.stdout || !strings.Contains(errs, tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q", code, out, errs, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(dir, messyPath)); string(b) != messy {
		t.Errorf("--check rewrote %s:\n%s", messyPath, b)
	}

	// Standard input is checked too.
	cmd := exec.Command(mqbcBin, "fmt", "--check", "-")
	cmd.Stdin = strings.NewReader(messy)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitError || string(out) != "<stdin>\n" {
		t.Errorf("fmt --check - on messy stdin: %v, stdout %q", err, out)
	}
}
