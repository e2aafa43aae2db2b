package runtime_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestDedupKeepsFirstInSourceOrder: with several processing workers the
// record a dedup step keeps for a key is its first in the input, in every
// run, so a clean run and a crashed one keep the same records. Without the
// turn gate the workers race for each key's reservation and a later
// record of a key is sometimes kept instead.
func TestDedupKeepsFirstInSourceOrder(t *testing.T) {
	const keys, copies = 40, 30
	for run := range 4 {
		dir := t.TempDir()
		var lines []string
		for i := range keys * copies {
			lines = append(lines, fmt.Sprintf(`{"k":"k%02d","seq":%d}`, i%keys, i))
		}
		writeLines(t, filepath.Join(dir, "in.jsonl"), lines...)
		p := compileMQB(t, `
route first {
  batch_size  = 2
  concurrency = 4
  from file { path = "in.jsonl" }
  dedup { key = payload.k, ttl = 1h }
  to file { path = "out.jsonl" }
}
`)
		runIn(t, dir, p)
		f, err := os.Open(filepath.Join(dir, "out.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]int{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec struct {
				K   string `json:"k"`
				Seq int    `json:"seq"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			if prev, ok := kept[rec.K]; ok {
				t.Fatalf("run %d: key %s kept twice (seq %d and %d)", run, rec.K, prev, rec.Seq)
			}
			kept[rec.K] = rec.Seq
		}
		f.Close()
		if len(kept) != keys {
			t.Fatalf("run %d: %d keys kept, want %d", run, len(kept), keys)
		}
		for i := range keys {
			k := fmt.Sprintf("k%02d", i)
			if kept[k] != i {
				t.Fatalf("run %d: key %s kept seq %d, want its first record, seq %d", run, k, kept[k], i)
			}
		}
	}
}
