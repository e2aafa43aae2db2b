//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// fileGlobSource reads a directory of chunk files through a glob: each
// chunk is a new file whose name sorts after the last, so a killed run
// resumes in the file it stopped in and later runs read the new ones.
var fileGlobSource = sourceCase{name: "file glob", setup: func(t *testing.T, dir string) sourceSetup {
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	return sourceSetup{from: `file { path = "logs/*.jsonl" }`, emit: func(t *testing.T, lines string) {
		// Written aside and renamed: the glob never shows half a file.
		tmp := filepath.Join(dir, ".chunk")
		if err := os.WriteFile(tmp, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(logs, fmt.Sprintf("chunk-%05d.jsonl", n))); err != nil {
			t.Fatal(err)
		}
		n++
	}}
}}
