package runtime_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	// A commit every 5 ms: the route moves ~100 MB in about as many
	// milliseconds, so with the default 100 ms the kills would all come
	// before its first commit.
	t.Setenv("MQB_CRASH_COMMIT_INTERVAL", "5ms")
	for _, seed := range []uint64{41, 42} {
		e := newTestEnv(t)
		out := filepath.Join(e.dir, "out.txt")
		const n = 4000000
		// line is input line i as a clean run writes it ("" for none: a
		// blank line, or the one too long, which goes to the DLQ).
		line := func(i int) string {
			switch {
			case i%50021 == 7:
				return ""
			case i%70001 == 9:
				return fmt.Sprintf("crlf %d %d", i, seed)
			case i == n/2:
				return ""
			}
			return fmt.Sprintf(`{"line":%d,"seed":%d}`, i, seed)
		}
		in := make([]byte, 0, 26*n)
		for i := range n {
			switch l := line(i); {
			case i == n/2:
				in = append(in, strings.Repeat("x", testMaxRecord+10)...)
			case strings.HasPrefix(l, "crlf"):
				in = append(in, l+"\r"...)
			default:
				in = append(in, l...)
			}
			in = append(in, '\n')
		}
		if err := os.WriteFile(e.input, in, 0o644); err != nil {
			t.Fatal(err)
		}
		in = nil
		planPath := plantest.WriteCrashPlan(t, linesPlan(e, out, 1024), e.dir)
		killMidWrite(t, bin, planPath, out, seed, 4)
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
		seen := make([]uint8, n)
		last, repeats := -1, 0
		for sc.Scan() {
			text := sc.Text()
			i := -1
			if rest, ok := strings.CutPrefix(text, `{"line":`); ok {
				fmt.Sscanf(rest, "%d", &i)
			} else if rest, ok := strings.CutPrefix(text, "crlf "); ok {
				fmt.Sscanf(rest, "%d", &i)
			}
			if i < 0 || i >= n || line(i) != text {
				t.Fatalf("output line %q is no input line (torn or foreign)", text)
			}
			if seen[i] > 0 {
				repeats++
				continue
			}
			seen[i] = 1
			if i < last {
				t.Fatalf("line %d first written after line %d: out of order", i, last)
			}
			last = i
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		lost := 0
		for i := range n {
			if line(i) != "" && seen[i] == 0 {
				lost++
			}
		}
		t.Logf("seed %d: %d repeated lines", seed, repeats)
		if lost > 0 {
			t.Errorf("%d lines lost", lost)
		}
		if dlq := readDLQLines(t, e.dlq); len(dlq) == 0 || dlq[0].Position != uint64(n/2-n/2/50021-1) {
			t.Errorf("DLQ %+v, want the over-long line", dlq)
		}
	}
}

// killMidWrite starts the crash helper on planPath kills times and
// SIGKILLs each run once it has written a seeded 2–40 MB more to out:
// while it moves lines, whatever the machine's speed, rather than at a
// moment a fast run may already have finished by.
func killMidWrite(t *testing.T, bin, planPath, out string, seed uint64, kills int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 8))
	size := func() int64 {
		st, err := os.Stat(out)
		if err != nil {
			return 0
		}
		return st.Size()
	}
	for i := range kills {
		from, more := size(), int64(2+rng.IntN(39))<<20
		r := plantest.StartHelper(t, bin, planPath)
		ended := false
		for !ended && size() < from+more {
			select {
			case err := <-r.Exited:
				t.Logf("run %d ended by itself before writing %d MB (err %v): %s", i, more>>20, err, r.Stderr.String())
				ended = true
			case <-time.After(200 * time.Microsecond):
			}
		}
		if ended {
			continue
		}
		if err := r.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-r.Exited
		t.Logf("run %d killed after writing %d bytes more (output %d bytes)", i, size()-from, size())
	}
}
