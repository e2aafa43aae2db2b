package runtime_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// linesPlan is file (text) → file (write_time) with a DLQ: no dedup
// step, so both files fsync in the commit, not in each write.
func linesPlan(e testEnv, out string, batch int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(e.input), "mode": enumV("consume"), "format": enumV("text"),
			"checkpoint_store": strV("pebble://" + e.state), "max_record_bytes": intV(testMaxRecord)}},
		dlqFile("n1", e.dlq, ""),
		{ID: "n2", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(out), "name_by": enumV("write_time")}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "lines", Guarantee: plan.AtLeastOnce, Concurrency: 1, BatchSize: batch,
		Nodes: nodes, Edges: chain(nodes)}}}
}

// TestCrashLinesAtLeastOnce kills a file → file route that syncs its
// output and its DLQ once per commit at random moments: every line is in
// the output (or, too long, in the DLQ) at least once, nothing else is
// there, and no line is torn.
func TestCrashLinesAtLeastOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, seed := range []uint64{31, 32} {
		e := newTestEnv(t)
		out := filepath.Join(e.dir, "out.txt")
		const n = 500000
		long := strings.Repeat("x", testMaxRecord+10)
		var in strings.Builder
		want := map[string]bool{}
		tooLong := map[uint64]bool{} // positions
		for i := range n {
			if i%9973 == 5 {
				in.WriteString(long + "\n")
				tooLong[uint64(i)] = true
				continue
			}
			line := fmt.Sprintf(`{"line":%d,"seed":%d}`, i, seed)
			want[line] = true
			in.WriteString(line + "\n")
		}
		if err := os.WriteFile(e.input, []byte(in.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		// Kills late enough for the runs to commit (every 100 ms) before
		// them, so later runs resume from positions committed after a Sync.
		planPath := plantest.WriteCrashPlan(t, linesPlan(e, out, 100), e.dir)
		plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: 4, MayEnd: true,
			Wait: plantest.KillWaits(seed, 5, 200*time.Millisecond, 1200*time.Millisecond),
			Progress: func() string {
				st, _ := os.Stat(out)
				if st == nil {
					return "(no output yet)"
				}
				return fmt.Sprintf("(output %d bytes)", st.Size())
			}})
		var st runtime.Stats
		plantest.StartHelper(t, bin, planPath).Finish(t, &st)
		rs := st.Route("lines")
		t.Logf("seed %d: final run %+v (read %d of %d: it resumed where the killed runs committed)", seed, rs, rs.In, n)
		if rs.Committed != n {
			t.Errorf("final run committed %d of %d", rs.Committed, n)
		}
		seen := map[string]int{}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if !want[sc.Text()] {
				t.Errorf("output line %q is no input line (torn or foreign)", sc.Text())
				continue
			}
			seen[sc.Text()]++
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		lost, dup := 0, 0
		for line := range want {
			switch c := seen[line]; {
			case c == 0:
				lost++
			case c > 1:
				dup += c - 1
			}
		}
		t.Logf("seed %d: %d lines, %d lost, %d repeated", seed, len(want), lost, dup)
		if lost > 0 {
			t.Errorf("%d of %d lines lost", lost, len(want))
		}
		dead := map[uint64]bool{}
		for _, l := range readDLQLines(t, e.dlq) {
			if !tooLong[l.Position] {
				t.Errorf("the DLQ holds position %d, not an over-long line", l.Position)
			}
			dead[l.Position] = true
		}
		if len(dead) != len(tooLong) {
			t.Errorf("the DLQ holds %d of the %d over-long lines", len(dead), len(tooLong))
		}
	}
}
