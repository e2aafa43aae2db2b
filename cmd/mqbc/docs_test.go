package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/docs/reference"
)

func TestDocsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // prefix
	}{
		{"stdout", []string{"docs"}, exitOK, "# mqb language reference"},
		{"to dir", []string{"docs", "-o", dir}, exitOK, filepath.Join(dir, "reference.md")},
		{"stray argument", []string{"docs", "x"}, exitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tt.stdout) {
				t.Errorf("stdout starts %.60q, want %q", stdout.String(), tt.stdout)
			}
		})
	}
	got, err := os.ReadFile(filepath.Join(dir, "reference.md"))
	if err != nil || !bytes.Equal(got, reference.Markdown()) {
		t.Errorf("written reference differs from reference.Markdown() (err %v)", err)
	}
}
