package objectstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/runtime"
)

// TestObjectStorePartsOfARenamedRoute: part names carry the route's name,
// so a route renamed once wrote its whole input again beside the parts
// it had written. Its sink now refuses, naming the other route, and
// writes nothing; named back, its replay writes nothing.
func TestObjectStorePartsOfARenamedRoute(t *testing.T) {
	d := t.TempDir()
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf(`{"n":%d}`, i))
	}
	if err := os.WriteFile(filepath.Join(d, "in.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lake := filepath.Join(d, "lake")
	src := func(route string) string {
		return fmt.Sprintf(`route %s {
  guarantee effectively_once
  from file { path = %q }
  to object_store { url = "file://%s", name_by = source_position }
}
`, route, filepath.Join(d, "in.jsonl"), lake)
	}
	objects := func() int {
		entries, _ := os.ReadDir(lake)
		return len(entries)
	}
	run := func(route string) error {
		opts := runtest.Options()
		opts.BaseDir, opts.StateDir = d, filepath.Join(d, "state-"+route)
		_, err := runtime.Run(context.Background(), plantest.Compile(t, src(route)), opts)
		return err
	}
	if err := run("copy"); err != nil {
		t.Fatal(err)
	}
	written := objects()
	if written == 0 {
		t.Fatal("no parts written")
	}
	err := run("copy_v2")
	if err == nil || !strings.Contains(err.Error(), "it holds parts of this same input written by route copy") {
		t.Fatalf("renamed route over its old parts: %v, want a refusal naming route copy", err)
	}
	if n := objects(); n != written {
		t.Errorf("the refused route left %d objects, want %d", n, written)
	}
	os.RemoveAll(filepath.Join(d, "state-copy"))
	if err := run("copy"); err != nil {
		t.Fatal(err)
	}
	if n := objects(); n != written {
		t.Errorf("named back, its replay left %d objects, want %d", n, written)
	}
}
