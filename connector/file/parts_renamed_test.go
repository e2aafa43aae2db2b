package file

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// TestPartsOfARenamedRoute: part names carry their route's name, so a
// route renamed (copy → copy_v2) once wrote its whole input again beside
// the parts it had written, exiting 0 with the verdict effectively-once.
// Now its sink refuses, naming the other route and a part, and writes
// nothing; renamed back, it resumes and writes nothing again. (A glob's
// parts carry a run epoch: a replay of a glob is at-least-once anyway.)
func TestPartsOfARenamedRoute(t *testing.T) {
	for _, tc := range []struct{ name, path, route, renamed string }{
		{"file", "in.jsonl", "copy", "copy_v2"},
		{"prefix of the other", "in.jsonl", "copy_v2", "copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			writeNumbered(t, filepath.Join(d, "in.jsonl"), 0, 50)
			src := func(route string) string {
				return fmt.Sprintf(`route %s {
  guarantee effectively_once
  from file { path = %q }
  to file { path = "parts", name_by = source_position }
}
`, route, tc.path)
			}
			parts := func() int {
				entries, _ := os.ReadDir(filepath.Join(d, "parts"))
				return len(entries)
			}
			runtest.RunIn(t, d, plantest.Compile(t, src(tc.route)))
			written := parts()
			if written == 0 {
				t.Fatal("no parts written")
			}
			os.RemoveAll(filepath.Join(d, "state")) // a new name: a state of its own
			opts := runtest.Options()
			opts.BaseDir, opts.StateDir = d, filepath.Join(d, "state")
			_, err := runRuntime(plantest.Compile(t, src(tc.renamed)), opts)
			if err == nil || !strings.Contains(err.Error(), "it holds parts of this same input written by route "+tc.route) ||
				!strings.Contains(err.Error(), "give it its old name back") {
				t.Fatalf("renamed route over its old parts: %v, want a refusal naming route %s", err, tc.route)
			}
			if n := parts(); n != written {
				t.Errorf("the refused route left %d parts, want the %d written before", n, written)
			}
			os.RemoveAll(filepath.Join(d, "state"))
			runtest.RunIn(t, d, plantest.Compile(t, src(tc.route)))
			if parts() != written {
				t.Errorf("named back, it left %d parts, want the %d written before (a replay skips them)", parts(), written)
			}
		})
	}
}
