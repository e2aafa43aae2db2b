package file

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// globCrashFiles writes the glob's input into dir/logs: files of
// different lengths, named so that name order is not the order they were
// written in, some lines blank (they take no index).
func globCrashFiles(t *testing.T, dir string) {
	t.Helper()
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, lines := range []int{4000, 9000, 1, 0, 7000, 12000, 3000, 6000} {
		var b strings.Builder
		for j := range lines {
			if j%97 == 5 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, `{"n": %d}`+"\n", n)
			n++
		}
		name := fmt.Sprintf("part-%02d.jsonl", 7-i)
		if err := os.WriteFile(filepath.Join(logs, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// globKeyedPlan reads dir/logs/*.jsonl into SQLite keyed by the file and
// the line in it: effectively-once.
func globKeyedPlan(t *testing.T, dir string) plan.Plan {
	t.Helper()
	p := plantest.Compile(t, fmt.Sprintf(`route globcrash {
  guarantee effectively_once
  batch_size = 500
  from file { path = %q, checkpoint_store = %q }
  id meta["mqb.src.file"] + ":" + meta["mqb.src.line"]
  to sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS lines (id TEXT PRIMARY KEY, n INTEGER NOT NULL)"
    insert_query = "INSERT INTO lines (id, n) VALUES (${meta[\"mqb.id\"]}, ${payload.n}) ON CONFLICT (id) DO NOTHING"
  }
}
`, filepath.Join(dir, "logs", "*.jsonl"), "pebble://"+filepath.Join(dir, "state"), "sqlite://"+filepath.Join(dir, "lines.db")))
	return p
}

// globLines is the table the route wrote, keyed by file (relative to
// dir) and line.
func globLines(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	rows := runtest.SQLiteMap[int64](t, filepath.Join(dir, "lines.db"), "SELECT id, n FROM lines")
	out := make(map[string]int64, len(rows))
	for k, v := range rows {
		out[strings.TrimPrefix(k, dir+string(filepath.Separator))] = v
	}
	return out
}

// TestCrashGlobSourceEffectivelyOnce SIGKILLs a glob → SQLite route keyed
// by file and line at moments drawn from a seed and lets it finish: the
// table must equal a clean run's, every line once under the same key.
// A resume that skipped a file, re-read one from the wrong byte or
// numbered lines from the wrong start would leave a row missing, extra or
// with another n.
func TestCrashGlobSourceEffectivelyOnce(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	clean := t.TempDir()
	globCrashFiles(t, clean)
	runtest.RunIn(t, clean, globKeyedPlan(t, clean))
	want := globLines(t, clean)
	if len(want) != 41001 {
		t.Fatalf("the clean run wrote %d rows, want 41001", len(want))
	}
	midway := 0
	for i, seed := range []uint64{171, 172, 173} {
		dir := t.TempDir()
		globCrashFiles(t, dir)
		planPath := plantest.WriteCrashPlan(t, globKeyedPlan(t, dir), dir)
		plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: 4, Wait: plantest.KillWaits(seed, 5, 200*time.Millisecond, 1500*time.Millisecond), MayEnd: true})
		if _, err := os.Stat(filepath.Join(dir, "lines.db")); err == nil {
			if n := len(globLines(t, dir)); n > 0 && n < len(want) {
				midway++
				t.Logf("seed %d: %d of %d rows written when the last kill struck", seed, n, len(want))
			}
		}
		var st runtime.Stats
		plantest.StartHelper(t, bin, planPath).Finish(t, &st)
		runtest.CheckCounts(t, st.Route("globcrash"))
		got := globLines(t, dir)
		if !maps.Equal(got, want) {
			missing, extra := 0, 0
			for k, v := range want {
				if g, ok := got[k]; !ok || g != v {
					missing++
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					extra++
				}
			}
			t.Errorf("run %d (seed %d): %d rows, want %d; %d missing or different, %d not in the clean run", i, seed, len(got), len(want), missing, extra)
		}
	}
	if midway == 0 {
		t.Error("no kill struck while the route was part way through the files: the test proved nothing")
	}
}
