package postgrescdc

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// TestPostgresCDCSilentConnection: the walsender streaming the slot is
// frozen (SIGSTOP), so the replication connection stays open and brings
// nothing, not even the keepalive the source asks for, and the server
// never ends it (an idle connection that is alive is kept: the walsender
// answers the keepalive the source asks for). Rows are written meanwhile. The source takes the silence
// for a lost connection, reconnects (refused while the frozen walsender
// holds the slot, until it is let go on and leaves) and streams from what
// the route committed: every row reaches the sink exactly once, and the
// route never stops. Without the silence timeout the route waits on the
// silent connection for ever, and the test fails at its deadline.
func TestPostgresCDCSilentConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("freezes a walsender")
	}
	prev := silenceTimeout
	silenceTimeout = 2 * time.Second
	t.Cleanup(func() { silenceTimeout = prev })

	url := testsrv.Postgres(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var dbName string
	if err := c.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	slot := "mqb_silent_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(dbName))
	pgExec(t, c, `CREATE TABLE orders (id INTEGER PRIMARY KEY, body TEXT)`)
	pgExec(t, c, `CREATE PUBLICATION mqb_pub FOR TABLE orders`)
	createSlot(t, c, slot) // dropped with the database

	e := plantest.NewEnv(t)
	db := filepath.Join(e.Dir, "got.db")
	plantest.SQLiteExec(t, db, `PRAGMA journal_mode=WAL`, sinkTable)
	p := outagePlan(e, url, db, slot, false)
	rec := newLogRecorder()
	opts := runtest.Options()
	opts.Logger = slog.New(rec)

	const before, n = 100, 400 // rows before the freeze, in all
	rctx, cancel := context.WithCancel(ctx)
	type end struct {
		st  runtime.Stats
		err error
	}
	ended := make(chan end, 1)
	go func() {
		st, err := runtime.Run(rctx, p, opts)
		ended <- end{st, err}
	}()
	var thaw func() = func() {}
	stopped := false
	defer func() {
		thaw() // never leave a frozen backend behind
		if !stopped {
			cancel()
			<-ended
		}
	}()

	(&outageWriter{url: url, n: before}).run(t)
	if !runtest.WaitFor(func() bool { return sinkIDs(t, db, "1") >= before }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("the route did not stream the first %d rows", before)
	}
	// Idle but alive, the connection is kept: the walsender (its
	// wal_sender_timeout the default minute, so its own keepalives come
	// every 30 s) answers the keepalive the source asks for.
	time.Sleep(2 * silenceTimeout)
	if m := rec.with("replication connection lost"); len(m) > 0 {
		t.Fatalf("an idle, live connection was given up: %s", m[0])
	}
	var pid int
	if err := c.QueryRow(ctx, `SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot).Scan(&pid); err != nil {
		t.Fatalf("the walsender of slot %s: %v", slot, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("freeze walsender %d: %v", pid, err)
	}
	thaw = sync.OnceFunc(func() { syscall.Kill(pid, syscall.SIGCONT) })
	t.Logf("froze walsender %d", pid)
	(&outageWriter{url: url, from: before, n: n}).run(t)

	// The source notices the silence (2 s here) and gives the connection
	// up; the server, its walsender frozen, never would.
	if !runtest.WaitFor(func() bool { return len(rec.with("replication connection lost")) > 0 }, 20*time.Second, 20*time.Millisecond) {
		t.Fatalf("the source did not notice the silent connection in 20 s: the route waits on it for ever (%d of %d rows in the sink)", sinkIDs(t, db, "1"), n)
	}
	lost := rec.with("replication connection lost")[0]
	t.Logf("log: %.300s", lost)
	if !strings.Contains(lost, "nothing received from the server") {
		t.Errorf("the connection was given up for another reason: %s", lost)
	}
	// The frozen walsender still holds the slot: the reconnect is refused
	// until it goes.
	refused := func() bool {
		for _, m := range rec.with("reconnecting the replication connection") {
			if strings.Contains(m, "55006") {
				return true
			}
		}
		return false
	}
	if !runtest.WaitFor(refused, 20*time.Second, 20*time.Millisecond) {
		t.Error("no reconnect was refused while the frozen walsender held the slot")
	}
	// Let go on, it finds its connection closed and ends, freeing the slot.
	thaw()
	if !runtest.WaitFor(func() bool { return len(rec.with("replication reconnected")) > 0 }, 30*time.Second, 20*time.Millisecond) {
		t.Fatal("the stream did not reconnect once the walsender was gone")
	}
	if !runtest.WaitFor(func() bool { return sinkIDs(t, db, "1") >= n }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("the sink holds %d of %d rows", sinkIDs(t, db, "1"), n)
	}
	select {
	case e := <-ended:
		stopped = true
		t.Fatalf("the route stopped: %v", e.err)
	default:
	}
	cancel()
	res := <-ended
	stopped = true
	if res.err != nil {
		t.Fatalf("run: %v", res.err)
	}
	checkOutageSink(t, url, db, 0, n)
	rs := res.st.Route("cdc")
	if rs.In != n || rs.Committed != rs.In {
		t.Errorf("the route read %d changes and committed %d, want %d each", rs.In, rs.Committed, n)
	}
}
