package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCompareRuns runs the file and SQLite pairs (the dedup left out and
// kept) on a small input: both sides must succeed (mqbc exits non-zero on
// any record it could not deliver) and the table must carry a ratio for
// each.
func TestCompareRuns(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	var out strings.Builder
	if err := run([]string{"-n", "3000", "-runs", "1", "-only", "file,sqlite,sqlite-dedup"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, name := range []string{"file→file", "file→SQLite", "file→SQLite dedup"} {
		found := false
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, name+"  ") && strings.Contains(line, "x ") && strings.Contains(line, "MiB") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no ratio in\n%s", name, out.String())
		}
	}
}
