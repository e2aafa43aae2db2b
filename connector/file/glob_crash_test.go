package file

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
// by file and line at points drawn from a seed (by rows written, so a
// fast machine that reads the files in a fraction of a second is struck
// part-way as surely as a slow one) and lets it finish: the
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
		killAtRows(t, bin, planPath, filepath.Join(dir, "lines.db"), len(want), seed, 4)
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

// killAtRows runs the crash helper kills times, SIGKILLing each run once
// the table holds a further 3–12% of total rows (drawn from seed) and up
// to 20 ms more, so every kill strikes while files remain to be read.
func killAtRows(t *testing.T, bin, planPath, db string, total int, seed uint64, kills int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 9))
	for i := range kills {
		target := countRows(db) + total*(3+rng.IntN(10))/100
		extra := time.Duration(rng.IntN(20)) * time.Millisecond
		r := plantest.StartHelper(t, bin, planPath)
		deadline := time.Now().Add(3 * time.Minute)
		ended := false
	wait:
		for countRows(db) < target && time.Now().Before(deadline) {
			select {
			case err := <-r.Exited:
				t.Logf("run %d ended by itself before %d rows (err %v): %s", i, target, err, r.Stderr.String())
				ended = true
				break wait
			case <-time.After(2 * time.Millisecond):
			}
		}
		if ended {
			continue
		}
		time.Sleep(extra)
		if err := r.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-r.Exited
		t.Logf("run %d killed at %d rows (target %d, +%v)", i, countRows(db), target, extra)
	}
}

// countRows is how many rows the table holds, 0 before it exists.
func countRows(db string) int {
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?mode=ro")
	if err != nil {
		return 0
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow("SELECT count(*) FROM lines").Scan(&n); err != nil {
		return 0
	}
	return n
}
