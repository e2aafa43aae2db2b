package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
)

// TestInitBuilds: every source × sink starter builds without an error and
// is in canonical layout; -o refuses to overwrite; an unknown kind is a
// usage error naming the kinds.
func TestInitBuilds(t *testing.T) {
	for _, from := range sortedKeys(starterSources) {
		for _, to := range sortedKeys(starterSinks) {
			src := starter(from, starterSources[from], to, starterSinks[to])
			p, ds := compileForTest(t, src)
			if ds != "" {
				t.Errorf("%s → %s does not build:\n%s\n%s", from, to, ds, src)
				continue
			}
			if len(p.Routes) != 1 || p.Routes[0].Guarantee == "" {
				t.Errorf("%s → %s: %d routes", from, to, len(p.Routes))
			}
			if got := formatForTest(t, src); got != src {
				t.Errorf("%s → %s is not in canonical layout:\n%s", from, to, got)
			}
		}
	}
	dir := t.TempDir()
	out, errs, code := mqbc(t, dir, "init", "-o", "p.mqb")
	if code != exitOK || out != "" || !strings.Contains(errs, "wrote p.mqb") {
		t.Fatalf("init -o: exit %d, %q %q", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, "p.mqb"))
	if err != nil || !strings.Contains(string(b), "route file_to_sql {") {
		t.Fatalf("p.mqb: %v\n%s", err, b)
	}
	if out, _, code := mqbc(t, dir, "build", "p.mqb"); code != exitOK || !strings.HasPrefix(out, "file_to_sql: effectively-once\n") {
		t.Errorf("build of the default starter: exit %d\n%s", code, out)
	}
	if _, errs, code := mqbc(t, dir, "init", "-o", "p.mqb"); code != exitError || !strings.Contains(errs, "exists") {
		t.Errorf("init -o over an existing file: exit %d, %q", code, errs)
	}
	if _, errs, code := mqbc(t, dir, "init", "--from", "rabbit"); code != exitUsage || !strings.Contains(errs, "kafka") {
		t.Errorf("init --from rabbit: exit %d, %q", code, errs)
	}
}

// compileForTest compiles one in-memory file; the errors as text, or "".
func compileForTest(t *testing.T, src string) (*plan.Plan, string) {
	t.Helper()
	p, ds := compiler.CompileSources([]compiler.Source{{Name: "starter.mqb", Src: []byte(src)}})
	if ds.HasErrors() {
		return nil, fmt.Sprint(ds)
	}
	return p, ""
}

func formatForTest(t *testing.T, src string) string {
	t.Helper()
	out, ds := lang.Format("starter.mqb", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("format: %v", ds)
	}
	return string(out)
}
