package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCompareRuns runs the file and SQLite pairs on a small input: both
// sides must succeed (mqbc exits non-zero on any record it could not
// deliver) and the table must carry a ratio for each.
func TestCompareRuns(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	for _, only := range []string{"file", "sqlite"} {
		var out strings.Builder
		if err := run([]string{"-n", "3000", "-runs", "1", "-only", only}, &out); err != nil {
			t.Fatalf("%s: %v\n%s", only, err, out.String())
		}
		if !strings.Contains(out.String(), "x ") || !strings.Contains(out.String(), "MiB") {
			t.Errorf("%s: no ratio in\n%s", only, out.String())
		}
	}
}
