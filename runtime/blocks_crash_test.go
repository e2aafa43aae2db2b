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
	"github.com/mqb-dev/mqb/runtime"
)

// TestCrashBlocksAtLeastOnce kills a file → file route that moves its
// lines in blocks (text, no step: nothing reads a record) at random
// moments, with lines between the blocks that go as records (blank lines,
// carriage returns, one too long for the DLQ). The output of the killed
// runs and the last one, with each repeated line kept only where it first
// appears, is a clean run's output, in order: no line lost, none torn,
// none foreign; a line repeats only because a run wrote it after the
// position its rerun resumed from (at-least-once, as the verdict says).
func TestCrashBlocksAtLeastOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, seed := range []uint64{41, 42} {
		e := newTestEnv(t)
		out := filepath.Join(e.dir, "out.txt")
		const n = 3000000
		var in strings.Builder
		var clean []string
		for i := range n {
			switch {
			case i%50021 == 7:
				in.WriteString("\n") // blank: skipped, no index
			case i%70001 == 9:
				line := fmt.Sprintf("crlf %d %d", i, seed)
				in.WriteString(line + "\r\n")
				clean = append(clean, line)
			case i == n/2:
				in.WriteString(strings.Repeat("x", testMaxRecord+10) + "\n") // to the DLQ
			default:
				line := fmt.Sprintf(`{"line":%d,"seed":%d}`, i, seed)
				in.WriteString(line + "\n")
				clean = append(clean, line)
			}
		}
		if err := os.WriteFile(e.input, []byte(in.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		planPath := plantest.WriteCrashPlan(t, linesPlan(e, out, 1024), e.dir)
		plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: 4, MayEnd: true,
			Wait: plantest.KillWaits(seed, 7, 50*time.Millisecond, 250*time.Millisecond),
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
		t.Logf("seed %d: final run %+v", seed, rs)
		if want := int64(n - n/50021 - 1); rs.Committed != want {
			t.Errorf("final run committed %d records, want %d", rs.Committed, want)
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var firsts []string
		seen := map[string]bool{}
		repeats := 0
		for sc.Scan() {
			if seen[sc.Text()] {
				repeats++
				continue
			}
			seen[sc.Text()] = true
			firsts = append(firsts, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %d lines out, %d of them repeats", seed, len(firsts)+repeats, repeats)
		if len(firsts) != len(clean) {
			t.Errorf("%d distinct lines out, a clean run writes %d", len(firsts), len(clean))
		}
		for i := range min(len(firsts), len(clean)) {
			if firsts[i] != clean[i] {
				t.Fatalf("distinct line %d is %q, a clean run's is %q", i, firsts[i], clean[i])
			}
		}
		if dlq := readDLQLines(t, e.dlq); len(dlq) == 0 || dlq[0].Position != uint64(n/2-n/2/50021-1) {
			t.Errorf("DLQ %+v, want the over-long line", dlq)
		}
	}
}
