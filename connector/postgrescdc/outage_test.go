package postgrescdc

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// outagePlan streams publication mqb_pub into table got (sinkTable) of
// the SQLite database at db, one row per change and nothing deduplicated (an
// at-least-once route: a change handed over twice is written twice), with
// a retry step before the sink, so a sink the test holds locked past its
// busy timeout is written again.
func outagePlan(e plantest.Env, url, db, slot string, snapshot bool) plan.Plan {
	src := map[string]plan.Value{"url": plantest.Str(url), "publication": plantest.Str("mqb_pub"),
		"slot_name": plantest.Str(slot), "checkpoint_store": plantest.Str("pebble://" + e.State)}
	if snapshot {
		src["snapshot"] = plan.Value{Type: plan.TBool, Bool: true}
	}
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "postgres_cdc", Attrs: src},
		{ID: "n1", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url": plantest.Tmpl(plantest.Lit("sqlite://" + db)),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO got (id, lsn, op) VALUES ("), plantest.Ex("payload.id"), plantest.Lit(", "),
				plantest.Ex(`meta["postgres.lsn"]`), plantest.Lit(", "), plantest.Ex(`meta["postgres.operation"]`), plantest.Lit(")")),
		}},
	}
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "cdc", Guarantee: plan.AtLeastOnce,
		Concurrency: 1, BatchSize: 100, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
	return plantest.WithRetryAt(p, 1, 1000)
}

// sinkTable is the table outagePlan writes to, created before the route
// runs (so the test can lock it from the start).
const sinkTable = `CREATE TABLE got (n INTEGER PRIMARY KEY AUTOINCREMENT, id INTEGER NOT NULL, lsn INTEGER NOT NULL, op TEXT NOT NULL)`

// outageWriter inserts rows 0 … n-1 into orders, 1 to 3 to a transaction,
// on a connection of its own, through the outage: a transaction that
// fails is tried again (on a new connection once the server is back)
// until it commits. Its inserts do nothing on a key that exists, so a
// commit whose answer was lost and that is tried again changes nothing:
// every row is inserted by exactly one committed transaction.
type outageWriter struct {
	url     string
	from, n int
	pace    time.Duration
	done    atomic.Bool
	paused  atomic.Bool // waits before its next transaction while set
	written atomic.Int64
	retries atomic.Int64
}

func (w *outageWriter) run(t *testing.T) {
	ctx := context.Background()
	var c *pgx.Conn
	defer func() {
		if c != nil {
			c.Close(ctx)
		}
		w.done.Store(true)
	}()
	for i := w.from; i < w.n; {
		for w.paused.Load() {
			time.Sleep(5 * time.Millisecond)
		}
		k := min(1+i%3, w.n-i)
		for {
			err := func() error {
				if c == nil {
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					var err error
					if c, err = pgx.Connect(cctx, w.url); err != nil {
						c = nil
						return err
					}
				}
				tx, err := c.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				for id := i; id < i+k; id++ {
					if _, err := tx.Exec(ctx, `INSERT INTO orders (id, body) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, fmt.Sprintf("row %d", id)); err != nil {
						return err
					}
				}
				return tx.Commit(ctx)
			}()
			if err == nil {
				break
			}
			w.retries.Add(1)
			if c != nil {
				c.Close(ctx)
				c = nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		i += k
		w.written.Store(int64(i))
		time.Sleep(w.pace)
	}
}

// logRecorder keeps the messages the route logs (with their attributes)
// and passes them on to the test's logger.
type logRecorder struct {
	slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newLogRecorder() *logRecorder {
	return &logRecorder{Handler: plantest.Logger().Handler(), mu: &sync.Mutex{}, msgs: &[]string{}}
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	*h.msgs = append(*h.msgs, b.String())
	h.mu.Unlock()
	if h.Handler.Enabled(ctx, r.Level) {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{Handler: h.Handler.WithAttrs(as), mu: h.mu, msgs: h.msgs}
}

func (h *logRecorder) WithGroup(name string) slog.Handler {
	return &logRecorder{Handler: h.Handler.WithGroup(name), mu: h.mu, msgs: h.msgs}
}

// with returns the messages logged that start with prefix.
func (h *logRecorder) with(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range *h.msgs {
		if strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// gauge reads the value of a metric family the run registered (0 when
// absent).
func gauge(reg *prometheus.Registry, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
		}
	}
	return 0
}

// sinkCount is how many rows table got of the SQLite database at db holds
// (-1 before it exists).
func sinkCount(db string) int {
	if !plantest.TableExists(db, "got") {
		return -1
	}
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return -1
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM got`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// sinkLock holds the SQLite sink's write lock: the route's writes wait
// (and fail after the busy timeout, and the retry step writes them
// again), so what the source hands over meanwhile is not committed.
type sinkLock struct{ tx *sql.Tx }

func lockSink(t *testing.T, db string) *sinkLock {
	t.Helper()
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?_txlock=immediate&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tx, err := conn.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return &sinkLock{tx: tx}
}

func (l *sinkLock) release() { l.tx.Rollback() }

// TestPostgresCDCServerOutage: the PostgreSQL server goes down while
// changes stream (a fast shutdown; a SIGKILL; a SIGKILL while changes are
// handed over to the route and not yet committed) or while the snapshot
// is read (a fast shutdown; a SIGKILL), and comes back on the same port
// and data. Rows are written all along. The route rides through: the
// stream reconnects, starts again at what the route committed and drops
// the transactions the slot replays that it had handed over, so every row
// reaches the sink exactly once as a change. Mid-snapshot the source
// reconnects and reads the rest in a new snapshot from the committed row
// on (what was handed over and not committed is read again: this
// at-least-once sink may take such a snapshot row twice), then streams
// the changes: each row once as a change, and each row from before the
// slot at least once as a snapshot row.
func TestPostgresCDCServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a PostgreSQL server")
	}
	srv := testsrv.NewPostgres(t)
	for _, tc := range []struct {
		name string
		// uncommitted: hold the sink's lock from before the kill until
		// the stream is back, so the slot replays what was handed over.
		uncommitted bool
		snapshot    bool
		down        func(t testing.TB)
	}{
		{name: "fast_shutdown", down: srv.Stop},
		{name: "kill", down: srv.Kill},
		{name: "kill_uncommitted", uncommitted: true, down: srv.Kill},
		{name: "stop_mid_snapshot", snapshot: true, down: srv.Stop},
		{name: "kill_mid_snapshot", snapshot: true, down: srv.Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := srv.NewDatabase(t).URL
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			for _, q := range []string{
				`CREATE TABLE orders (id INTEGER PRIMARY KEY, body TEXT)`,
				`CREATE PUBLICATION mqb_pub FOR TABLE orders`,
			} {
				if _, err := c.Exec(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
			slot := "mqb_outage_" + tc.name // slots are the server's, not a database's
			const n = 3000
			before := 0 // rows in the table before the slot: the snapshot's
			if tc.snapshot {
				before = 20000
				if _, err := c.Exec(context.Background(), `INSERT INTO orders SELECT g, 'row ' || g FROM generate_series(0, $1 - 1) g`, before); err != nil {
					t.Fatal(err)
				}
			} else {
				createSlot(t, c, slot)
			}
			c.Close(context.Background())
			e := plantest.NewEnv(t)
			db := filepath.Join(e.Dir, "got.db")
			// The sink's table exists before the route (so the test can
			// lock it).
			plantest.SQLiteExec(t, db, `PRAGMA journal_mode=WAL`, sinkTable)
			p := outagePlan(e, url, db, slot, tc.snapshot)
			rec := newLogRecorder()
			reg := prometheus.NewRegistry()
			opts := runtest.Options()
			opts.Logger = slog.New(rec)
			opts.Registerer = reg

			w := &outageWriter{url: url, from: before, n: before + n, pace: time.Millisecond}
			var lock *sinkLock
			var confirmedDuringLock string // the slot's confirmed_flush_lsn while changes were uncommitted
			var rowsDuringLock int
			started := make(chan struct{})
			outage := func() {
				// Records handed over and not committed: the sink waits
				// on the lock. (Mid-snapshot, it is held from the start,
				// which keeps the snapshot from reading on.)
				holdSink := func() {
					lock = lockSink(t, db)
					// Read and not in the sink, which takes nothing now:
					// not committed (a record counted in the commit lag may
					// be written already).
					if !runtest.WaitFor(func() bool { return gauge(reg, "mqb_records_in_total") > float64(sinkCount(db)) }, time.Minute, 5*time.Millisecond) {
						t.Fatal("no record in flight under the sink's lock")
					}
				}
				if !runtest.WaitFor(func() bool { return w.written.Load() > int64(before+n/4) }, time.Minute, 10*time.Millisecond) {
					t.Fatal("the writer is stuck")
				}
				if tc.uncommitted {
					holdSink()
					// Few enough that the source is not blocked handing
					// over more, and sees the connection go.
					w.paused.Store(true)
				}
				if lock != nil {
					rowsDuringLock = sinkCount(db)
					t.Logf("in flight at the outage: %v records read, %d in the sink", gauge(reg, "mqb_records_in_total"), rowsDuringLock)
				}
				tc.down(t)
				if tc.snapshot {
					lock.release() // the snapshot's next page meets the dead connection
				}
				time.Sleep(500 * time.Millisecond)
				srv.Start(t)
				if tc.uncommitted {
					// The stream is back (the slot active again) while what
					// it had handed over is still not committed: the slot
					// replays it.
					if !runtest.WaitFor(func() bool { return len(rec.with("replication reconnected")) > 0 }, time.Minute, 20*time.Millisecond) {
						t.Error("the stream did not reconnect under the sink's lock")
					}
					// A standby status update or more (the writer stays
					// paused: a source blocked handing over sends none).
					time.Sleep(1500 * time.Millisecond)
					confirmedDuringLock = slotConfirmed(t, url, slot)
					if got := sinkCount(db); got != rowsDuringLock {
						t.Errorf("the sink took rows under the lock: %d, then %d", rowsDuringLock, got)
					}
					lock.release()
					w.paused.Store(false)
				}
			}
			go func() {
				if tc.snapshot {
					<-started
				}
				w.run(t)
			}()
			done := func() bool {
				if !w.done.Load() {
					return false
				}
				return sinkIDs(t, db, "op != 'snapshot'") >= n && sinkIDs(t, db, "op = 'snapshot'") >= before
			}
			underway := func() bool { return sinkCount(db) > 0 }
			if tc.snapshot {
				// The snapshot stalls under the sink's lock after its first
				// records, and the outage lands while it is read; the
				// writer starts once the slot is there (its rows are
				// changes, not the snapshot's).
				lock = lockSink(t, db)
				underway = func() bool {
					if !slotExists(url, slot) {
						return false
					}
					select {
					case <-started:
					default:
						close(started)
					}
					return gauge(reg, "mqb_commit_lag_records") > 0
				}
			} else {
				close(started)
			}
			rs := runtest.Outage{Plan: p, Route: "cdc", Underway: underway, Outage: outage, Done: done,
				Expect: runtest.RidesThrough, Options: &opts, Limit: 2 * time.Minute}.Run(t)
			t.Logf("stats of the last run: %+v; writer retried %d transactions", rs, w.retries.Load())
			for _, m := range rec.with("replication connection lost") {
				t.Logf("log: %.300s", m)
			}
			for _, m := range rec.with("dropped the transactions") {
				t.Logf("log: %s", m)
			}
			checkOutageSink(t, url, db, before, n)
			if tc.snapshot && len(rec.with("snapshot reconnected")) == 0 {
				t.Error("the snapshot never reconnected: the outage did not land while it was read")
			}
			for _, m := range rec.with("snapshot reconnected") {
				t.Logf("log: %s", m)
			}
			if !tc.snapshot {
				if len(rec.with("replication reconnected")) == 0 {
					t.Error("the stream never reconnected: the outage did not reach it")
				}
				// One run read every change once: nothing handed over twice.
				if rs.In != int64(n) {
					t.Errorf("the route read %d changes, want %d", rs.In, n)
				}
				// Seq went on without a gap, or the commit would stall
				// (or the route fail) at the first number not handed out.
				if rs.Committed != rs.In {
					t.Errorf("the route committed %d of the %d changes it read", rs.Committed, rs.In)
				}
			}
			if tc.uncommitted {
				if len(rec.with("dropped the transactions")) == 0 {
					t.Error("no replayed transaction was dropped: the outage did not land with changes handed over and uncommitted")
				}
				// Confirmed never past what the route committed: every
				// change the sink took after the lock was uncommitted then,
				// and the slot's position must not be past its commit LSN.
				first := sinkMinLSNAfter(t, db, rowsDuringLock)
				conf, err := pglogrepl.ParseLSN(confirmedDuringLock)
				if err != nil {
					t.Fatalf("slot confirmed at %q: %v", confirmedDuringLock, err)
				}
				t.Logf("slot confirmed at %s under the lock; first uncommitted change committed at %s", conf, pglogrepl.LSN(first))
				if uint64(conf) > uint64(first) {
					t.Errorf("the slot was confirmed at %s, past the uncommitted change at %s", conf, pglogrepl.LSN(first))
				}
			}
		})
	}
}

// slotExists reports whether the slot exists yet.
func slotExists(url, slot string) bool {
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		return false
	}
	defer c.Close(context.Background())
	var n int
	return c.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n) == nil && n > 0
}

// slotConfirmed is the slot's confirmed_flush_lsn.
func slotConfirmed(t *testing.T, url, slot string) string {
	t.Helper()
	var lsn string
	plantest.PGQuery(t, url, `SELECT coalesce(confirmed_flush_lsn::text, '0/0') FROM pg_replication_slots WHERE slot_name = '`+slot+`'`, func(t *testing.T, rows plantest.Rows) int {
		for rows.Next() {
			if err := rows.Scan(&lsn); err != nil {
				t.Fatal(err)
			}
		}
		return 0
	})
	return lsn
}

// sinkIDs counts the distinct ids of got's rows that match where.
func sinkIDs(t *testing.T, db, where string) int {
	if !plantest.TableExists(db, "got") {
		return 0
	}
	m := runtest.SQLiteMap[int](t, db, `SELECT 'x', count(DISTINCT id) FROM got WHERE `+where)
	return m["x"]
}

// sinkMinLSNAfter is the lowest commit LSN of got's rows after the first
// skip (in the order the sink took them).
func sinkMinLSNAfter(t *testing.T, db string, skip int) int64 {
	m := runtest.SQLiteMap[int64](t, db, fmt.Sprintf(`SELECT 'x', min(lsn) FROM (SELECT lsn FROM got ORDER BY n LIMIT -1 OFFSET %d)`, skip))
	return m["x"]
}

// checkOutageSink checks that the sink holds each row of orders written
// after the slot (before … before+n-1) exactly once as a change (an
// insert), and each row from before the slot as a snapshot row: at least
// once (a snapshot row handed over and not committed when the snapshot's
// connection was lost is read again); a row written after the slot may
// also be a snapshot row, when the rest of the snapshot was read (in a
// new snapshot) after it was written.
func checkOutageSink(t *testing.T, url, db string, before, n int) {
	t.Helper()
	var inTable int
	plantest.PGQuery(t, url, `SELECT count(*) FROM orders`, func(t *testing.T, rows plantest.Rows) int {
		for rows.Next() {
			rows.Scan(&inTable)
		}
		return 0
	})
	if inTable != before+n {
		t.Fatalf("orders holds %d rows, want %d", inTable, before+n)
	}
	type key struct {
		id   int
		snap bool
	}
	counts := map[key]int{}
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT id, op = 'snapshot', count(*) FROM got GROUP BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k key
		var c int
		if err := rows.Scan(&k.id, &k.snap, &c); err != nil {
			t.Fatal(err)
		}
		counts[k] = c
	}
	var lost, twice, stray []int
	for id := range before + n {
		want := key{id, id < before}
		switch c := counts[want]; {
		case c == 0:
			lost = append(lost, id)
		case c > 1 && !want.snap:
			twice = append(twice, id)
		}
		delete(counts, want)
	}
	for k, c := range counts {
		if !(k.snap && k.id >= before && c >= 1) {
			stray = append(stray, k.id)
		}
	}
	t.Logf("sink: %d rows lost, %d more than once, %d stray", len(lost), len(twice), len(stray))
	if len(lost)+len(twice)+len(stray) > 0 {
		some := func(ids []int) []int {
			sort.Ints(ids)
			return ids[:min(len(ids), 20)]
		}
		t.Errorf("sink: %d of %d rows lost (%v), %d more than once (%v), %d unexpected (%v)",
			len(lost), before+n, some(lost), len(twice), some(twice), len(stray), some(stray))
	}
}

// TestPostgresCDCUnhealable: the replication connection is cut (its
// walsender terminated) and the answer to the reconnect cannot heal by
// retrying, or the slot cannot outlive its connection: the route stops
// with an error naming the slot instead of retrying for ever.
func TestPostgresCDCUnhealable(t *testing.T) {
	for _, tc := range []struct {
		name string
		temp bool
		// cut ends the stream (and what it needs), as the test's
		// superuser connection c.
		cut  func(t *testing.T, c *pgx.Conn, slot, role string)
		says string
	}{
		{name: "login_refused", says: "not permitted to log in", cut: func(t *testing.T, c *pgx.Conn, slot, role string) {
			pgExec(t, c, `ALTER ROLE `+role+` NOLOGIN`)
			terminateWalsender(t, c, slot)
		}},
		{name: "slot_dropped", says: "does not exist", cut: func(t *testing.T, c *pgx.Conn, slot, _ string) {
			// The walsender lets go of the slot a moment after it is
			// terminated, and the source reconnects 100 ms later.
			deadline := time.Now().Add(30 * time.Second)
			for {
				terminateWalsender(t, c, slot)
				if _, err := c.Exec(context.Background(), `SELECT pg_drop_replication_slot($1)`, slot); err == nil {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("could not drop slot %s", slot)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}},
		{name: "temporary_slot", temp: true, says: "temporary slot", cut: func(t *testing.T, c *pgx.Conn, slot, _ string) {
			terminateWalsender(t, c, slot)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testsrv.Postgres(t)
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			var db string
			if err := c.QueryRow(context.Background(), `SELECT current_database()`).Scan(&db); err != nil {
				t.Fatal(err)
			}
			role, slot := db+"_cdc", "mqb_unhealable_"+tc.name+"_"+db[len(db)-1:]
			pgExec(t, c, `CREATE ROLE `+role+` LOGIN REPLICATION`)
			t.Cleanup(func() {
				if c, err := pgx.Connect(context.Background(), url); err == nil {
					c.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
					c.Exec(context.Background(), `SELECT pg_drop_replication_slot($1) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, slot)
					c.Exec(context.Background(), `DROP ROLE IF EXISTS `+role)
					c.Close(context.Background())
				}
			})
			pgExec(t, c, `CREATE TABLE orders (id INTEGER PRIMARY KEY, body TEXT)`)
			pgExec(t, c, `CREATE PUBLICATION mqb_pub FOR TABLE orders`)
			if !tc.temp {
				createSlot(t, c, slot)
			}
			e := plantest.NewEnv(t)
			sinkDB := filepath.Join(e.Dir, "got.db")
			plantest.SQLiteExec(t, sinkDB, `PRAGMA journal_mode=WAL`, sinkTable)
			p := outagePlan(e, strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1), sinkDB, slot, false)
			if tc.temp {
				p.Routes[0].Nodes[0].Attrs["temporary_slot"] = plan.Value{Type: plan.TBool, Bool: true}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			type end struct{ err error }
			ended := make(chan end, 1)
			go func() {
				_, err := runtime.Run(ctx, p, runtest.Options())
				ended <- end{err}
			}()
			waitSlot(t, c, slot)
			pgExec(t, c, `INSERT INTO orders VALUES (1, 'one')`)
			if !runtest.WaitFor(func() bool { return sinkCount(sinkDB) > 0 }, time.Minute, 20*time.Millisecond) {
				t.Fatal("nothing streamed")
			}
			tc.cut(t, c, slot, role)
			select {
			case e := <-ended:
				if e.err == nil || !strings.Contains(e.err.Error(), "slot "+slot) || !strings.Contains(e.err.Error(), tc.says) {
					t.Fatalf("the route ended with %v, want an error naming slot %s and saying %q", e.err, slot, tc.says)
				}
				t.Logf("stopped: %v", e.err)
			case <-time.After(time.Minute):
				t.Fatal("the route did not stop")
			}
		})
	}
}

func pgExec(t *testing.T, c *pgx.Conn, q string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// terminateWalsender ends the walsender streaming slot, if one is.
func terminateWalsender(t *testing.T, c *pgx.Conn, slot string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot); err != nil {
		t.Fatal(err)
	}
}
