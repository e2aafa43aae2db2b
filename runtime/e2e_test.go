package runtime

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
)

func testOptions(t testing.TB) Options {
	lvl := slog.LevelError
	if testing.Verbose() {
		lvl = slog.LevelInfo
	}
	return Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))}
}

func checkCounts(t testing.TB, st RouteStats) {
	t.Helper()
	if st.In != st.Out+st.Deduplicated+st.Filtered+st.DeadLettered+st.Errors {
		t.Errorf("counts do not add up: %+v", st)
	}
}

func TestFileToSQLite(t *testing.T) {
	for _, tc := range []struct {
		name               string
		n, batch, workers  int
	}{
		{"batch1024", 5000, 1024, 1},
		{"small batches concurrent", 3000, 7, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			ds := genDataset(t, e.input, tc.n, 1)
			st, err := Run(context.Background(), sqlitePlan(e, tc.batch, tc.workers), testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			rs := st.Route("orders")
			checkCounts(t, rs)
			if rs.In != int64(tc.n) || rs.Committed != int64(tc.n) {
				t.Errorf("in %d committed %d, want %d", rs.In, rs.Committed, tc.n)
			}
			if rs.Out != int64(len(ds.ids)) || rs.Deduplicated != int64(ds.dups) || rs.DeadLettered != int64(len(ds.bad)) {
				t.Errorf("stats %+v, want out %d dedup %d dlq %d", rs, len(ds.ids), ds.dups, len(ds.bad))
			}
			checkSQLite(t, e.db, ds)
			checkDLQ(t, readDLQ(t, e.dlq), ds.bad, true)

			// A second run over the same file resumes at the end: nothing moves.
			st, err = Run(context.Background(), sqlitePlan(e, tc.batch, tc.workers), testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if rs := st.Route("orders"); rs.In != 0 {
				t.Errorf("rerun read %d records, want 0", rs.In)
			}
		})
	}
}

// cancelWriter cancels a run the first time progress is reported.
type cancelWriter struct{ cancel context.CancelFunc }

func (w cancelWriter) Write(p []byte) (int, error) { w.cancel(); return len(p), nil }

func TestRestartExactlyOnce(t *testing.T) {
	e := newTestEnv(t)
	const n = 60000
	ds := genDataset(t, e.input, n, 2)
	ctx, cancel := context.WithCancel(context.Background())
	opts := testOptions(t)
	opts.Progress = cancelWriter{cancel}
	opts.ProgressInterval = 20 * time.Millisecond
	st, err := Run(ctx, sqlitePlan(e, 256, 2), opts)
	if err != nil {
		t.Fatal(err)
	}
	first := st.Route("orders")
	checkCounts(t, first)
	if first.Committed >= n {
		t.Logf("first run finished before the cancel (%d records); the restart is trivial", first.Committed)
	}
	st, err = Run(context.Background(), sqlitePlan(e, 512, 1), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	second := st.Route("orders")
	checkCounts(t, second)
	if first.Committed+second.In != n {
		t.Errorf("first run committed %d, second read %d: want %d in all", first.Committed, second.In, n)
	}
	checkSQLite(t, e.db, ds)
	// A graceful drain commits everything it acked: no replay, so the DLQ
	// holds each bad line exactly once.
	checkDLQ(t, readDLQ(t, e.dlq), ds.bad, true)
	t.Logf("first run %+v, second run %+v", first, second)
}
