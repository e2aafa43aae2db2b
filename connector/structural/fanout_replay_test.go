package structural

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/mqb-dev/mqb/connector/objectstore" // to object_store, a fanout target here
	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// A record one fanout target refuses is dead-lettered on a replay too,
// when another target finds it in a part an earlier run wrote. Soundness
// seed 16001: a kill after the part holding a record was written, before
// its dead-letter write and commit; on the replay the part target marked
// it covered, the sql target refused it again, and the record was acked
// as a duplicate, its refusal dropped, so it never reached the DLQ. The
// replay is made here by running again without the checkpoint and the
// DLQ, the parts and the table kept, in either order of the targets.
func TestFanoutReplayDeadLettersRefusedCoveredRecord(t *testing.T) {
	for _, c := range []struct {
		name, parts string
		partsFirst  bool
	}{
		{"object_store_first", `to object_store { url = "file://parts", name_by = source_position }`, true},
		{"object_store_last", `to object_store { url = "file://parts", name_by = source_position }`, false},
		{"file_first", `to file { path = "parts", name_by = source_position }`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			partsFirst, parts := c.partsFirst, c.parts
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"),
				`{"id":"o1","amount":1}`, `{"id":"o2"}`, `{"id":"o3","amount":3}`)
			table := `to sql {
      url          = "sqlite://out.db"
      create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
      insert_query = "INSERT INTO orders (id, amount) VALUES (${payload.id}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
    }`
			targets := parts + "\n    " + table
			if !partsFirst {
				targets = table + "\n    " + parts
			}
			p := plantest.Compile(t, fmt.Sprintf(`
route fan {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to fanout {
    %s
  }
}
`, targets))
			dlq := filepath.Join(dir, "dlq.jsonl")
			for run := 1; run <= 2; run++ {
				st := runtest.RunIn(t, dir, p).Route("fan")
				t.Logf("run %d: %+v", run, st)
				if got := plantest.ReadDLQ(t, dlq); len(got) != 1 || got[1] != 1 {
					t.Fatalf("run %d: dlq holds positions %v, want position 1 once (stats %+v)", run, got, st)
				}
				// The replay: what the checkpoint and the DLQ kept is gone,
				// the parts and the table are not.
				for _, p := range []string{filepath.Join(dir, "state"), dlq} {
					if err := os.RemoveAll(p); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}
