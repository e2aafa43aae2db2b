package file

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

// unnestPartsPlan is file → unnest payload.items → filter payload.keep →
// file parts by source position, declared effectively-once (the compiler
// must prove it). The filter drops elements inside records, so parts start
// and end inside a record's elements.
func unnestPartsPlan(t *testing.T, dir string, batch int) plan.Plan {
	t.Helper()
	return plantest.Compile(t, fmt.Sprintf(`route parts {
  guarantee effectively_once
  batch_size = %d
  from file { path = %q, checkpoint_store = %q }
  unnest payload.items
  filter payload.keep
  dlq { to file { path = %q } }
  to file { path = %q, name_by = source_position }
}
`, batch, filepath.Join(dir, "in.jsonl"), "pebble://"+filepath.Join(dir, "state"), filepath.Join(dir, "dlq.jsonl"), filepath.Join(dir, "parts")))
}

// writeUnnestInput writes n records of 1 to 6 elements, about a quarter
// of them not kept, and returns the elements a run writes.
func writeUnnestInput(t *testing.T, path string, n int) map[string]bool {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 5))
	want := map[string]bool{}
	var b strings.Builder
	for i := range n {
		var items []string
		for j := range 1 + rng.IntN(6) {
			e, keep := fmt.Sprintf("r%d/%d", i, j), rng.IntN(4) != 0
			if keep {
				want[e] = true
			}
			items = append(items, fmt.Sprintf(`{"e": %q, "keep": %v}`, e, keep))
		}
		fmt.Fprintf(&b, "{\"items\": [%s]}\n", strings.Join(items, ", "))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return want
}

// readUnnestParts returns how often each element is in the parts under
// dir, and the part names, sorted.
func readUnnestParts(t *testing.T, dir string) (map[string]int, []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var names []string
	for _, en := range entries {
		if partNameRE.FindStringSubmatch(en.Name()) == nil {
			t.Errorf("unexpected file %s", en.Name())
			continue
		}
		names = append(names, en.Name())
		for _, l := range readLines(t, filepath.Join(dir, en.Name())) {
			var v struct{ E string }
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("part %s: %q: %v", en.Name(), l, err)
			}
			seen[v.E]++
		}
	}
	slices.Sort(names)
	return seen, names
}

// A replay that finds parts ending inside a record's elements (a kill
// between two parts of one batch leaves them so) skips exactly the
// elements they hold and writes the rest of the record: every kept
// element lands once.
func TestPartsUnnestReplayInsideRecord(t *testing.T) {
	dir := t.TempDir()
	want := writeUnnestInput(t, filepath.Join(dir, "in.jsonl"), 400)
	parts := filepath.Join(dir, "parts")
	runRoute(t, unnestPartsPlan(t, dir, 40), "parts")
	seen, names := readUnnestParts(t, parts)
	plantest.CheckElementsExactlyOnce(t, seen, want)

	// Keep the parts through one that ends inside a record, half-way.
	cut := -1
	for i := len(names) / 2; i < len(names) && cut < 0; i++ {
		if m := partNameRE.FindStringSubmatch(names[i]); m != nil {
			if _, last, _ := strings.Cut(m[3], "-"); strings.Contains(last, ".") {
				cut = i
			}
		}
	}
	if cut < 0 {
		t.Fatalf("no part ends inside a record's elements: %v", names)
	}
	kept := 0
	for _, name := range names[:cut+1] {
		kept += len(readLines(t, filepath.Join(parts, name)))
	}
	for _, name := range names[cut+1:] {
		if err := os.Remove(filepath.Join(parts, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}

	replay := runRoute(t, unnestPartsPlan(t, dir, 33), "parts")
	if replay.Deduplicated != int64(kept) || replay.Out != int64(len(want)-kept) {
		t.Errorf("replay %+v: want %d deduplicated (the kept parts' elements) and %d out", replay, kept, len(want)-kept)
	}
	seen, _ = readUnnestParts(t, parts)
	plantest.CheckElementsExactlyOnce(t, seen, want)
	t.Logf("kept %d parts through %s; replay %+v", cut+1, names[cut], replay)
}
