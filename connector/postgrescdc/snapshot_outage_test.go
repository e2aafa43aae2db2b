package postgrescdc

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// TestPostgresCDCSnapshotServerOutage: the PostgreSQL server goes down
// (each of testsrv.Downs: a fast shutdown, a SIGKILL) while the snapshot
// is read, with rows handed over to the route and not committed (the
// sink held locked from the start), and comes back on the same port and
// data. The route does not stop: the source reconnects, reads the rest in
// a new snapshot from the committed row on and then streams every change
// since the slot's start, including those made through the outage (rows
// inserted all along, retried while the server is down, and rows of the
// snapshot changed right after it is back). The warehouse, an upsert by
// table and key guarded by postgres.lsn, ends equal to the tables, as a
// clean run's does. resumes_at_committed drives the source itself to show
// where it resumes: right after the committed row, what was handed over
// and not committed read again under the same message_ids, the checkpoint
// never past what was committed.
func TestPostgresCDCSnapshotServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a PostgreSQL server")
	}
	srv := testsrv.NewPostgres(t)
	for _, d := range testsrv.Downs {
		t.Run(d.Name, func(t *testing.T) {
			url := srv.NewDatabase(t).URL
			const orders = 20000
			snapshotDB(t, url, orders)
			slot := "mqb_snapoutage_" + d.Name // slots are the server's, not a database's
			e := plantest.NewEnv(t)
			db := filepath.Join(e.Dir, "wh.db")
			plantest.SQLiteExec(t, db, `PRAGMA journal_mode=WAL`,
				`CREATE TABLE wh (tbl TEXT NOT NULL, k TEXT NOT NULL, lsn INTEGER NOT NULL, body TEXT NOT NULL, deleted BOOLEAN NOT NULL, PRIMARY KEY (tbl, k))`)
			// A retry step before the sink writes again what the lock
			// made fail.
			p := plantest.WithRetryAt(snapshotWarehousePlan(t, url, slot, e.State, db), 1, 1000)
			rec := newLogRecorder()
			reg := prometheus.NewRegistry()
			opts := runtest.Options()
			opts.Logger = slog.New(rec)
			opts.Registerer = reg

			// Rows inserted from the slot's start to the end, through the
			// outage (ids below the snapshot's rows).
			w := &outageWriter{url: url, n: 3000, pace: time.Millisecond}
			writing := false
			// The sink is locked from the start: the snapshot stalls
			// after its first records, handed over and not committed,
			// and the outage lands while it is read.
			lock := lockSink(t, db)
			underway := func() bool {
				if !slotExists(url, slot) {
					return false
				}
				if !writing {
					writing = true
					go w.run(t)
				}
				return gauge(reg, "mqb_commit_lag_records") > 0
			}
			touched := 0
			outage := func() {
				t.Logf("in flight at the outage: %v records read, %d in the sink", gauge(reg, "mqb_records_in_total"), sqliteCount(t, db, `SELECT count(*) FROM wh`))
				d.Take(srv, t)
				lock.release() // the snapshot's next page meets the dead connection
				time.Sleep(500 * time.Millisecond)
				srv.Start(t)
				// Changes to rows of the snapshot, made as the route
				// reconnects: streamed after the rest is read.
				touched = touchSnapshotRows(t, url)
			}
			// Done once the writer is and the warehouse holds the
			// tables' rows; compared row by row only when the counts
			// agree.
			done := func() bool {
				if !w.done.Load() {
					return false
				}
				want := sourceRows(t, url)
				if sqliteCount(t, db, `SELECT count(*) FROM wh WHERE NOT deleted`) != len(want) {
					return false
				}
				return strings.Join(warehouseRows(t, db), "\n") == strings.Join(want, "\n")
			}
			rs := runtest.Outage{Plan: p, Route: "snapwh", Underway: underway, Outage: outage, Done: done,
				Expect: runtest.RidesThrough, Options: &opts, Limit: 2 * time.Minute}.Run(t)
			t.Logf("stats: %+v; %d rows of the snapshot changed after the restart; writer retried %d transactions", rs, touched, w.retries.Load())
			for _, prefix := range []string{"snapshot connection lost", "snapshot reconnected", "snapshot read"} {
				for _, m := range rec.with(prefix) {
					t.Logf("log: %.300s", m)
				}
			}
			if len(rec.with("snapshot reconnected")) == 0 {
				t.Error("the snapshot never reconnected: the outage did not land while it was read")
			}
			if rs.DeadLettered+rs.Errors != 0 {
				t.Errorf("the route dropped records: %+v", rs)
			}
			if touched == 0 {
				t.Error("no row of the snapshot changed after the restart")
			}
			want, got := sourceRows(t, url), warehouseRows(t, db)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("warehouse holds %d live rows, the tables %d: %s", len(got), len(want), firstDiff(got, want))
			}
		})
	}
	t.Run("resumes_at_committed", func(t *testing.T) {
		testSnapshotResumesAtCommitted(t, srv)
	})
}

// testSnapshotResumesAtCommitted reads part of the snapshot through the
// source itself, commits part of what it read, kills the server and reads
// on: the source reconnects and the next record is the row right after
// the committed one (the rows handed over after it are read again, under
// the same message_ids), the checkpoint stays at the committed row until
// a row read again is committed, the slot is not confirmed past its
// start, and once the snapshot is read a change made after the restart
// streams.
func testSnapshotResumesAtCommitted(t *testing.T, srv *testsrv.PGServer) {
	url := srv.NewDatabase(t).URL
	const orders = 5000
	c := snapshotDB(t, url, orders)
	slot := "mqb_snapresume"
	rec := newLogRecorder()
	s := &pgCDCSource{route: "snap", node: "n0", log: slog.New(rec), rawURL: url, url: url,
		publication: "mqb_pub", slot: slot, keepCP: true, snapshot: true, silence: silenceTimeout,
		recs: make(chan []runtime.Record, 64), errs: make(chan error, 1), done: make(chan struct{}),
		relation: map[uint32]*pglogrepl.RelationMessage{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Open(ctx, checkpoint.Position{}, false, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := slotConfirmed(t, url, slot)
	var read []runtime.Record // every record handed over, by Seq
	next := func() []runtime.Record {
		t.Helper()
		b, _, err := s.Next(ctx, 500)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		read = append(read, b.Records()...)
		return b.Records()
	}
	// lines (300 rows, read first) and three pages of orders handed
	// over, the first 1200 records committed (orders up to
	// snapBase+899).
	for len(read) < 3*snapshotPage || len(s.pending) > 0 {
		next()
	}
	handed := len(read)
	const committed = 1200
	pos, _ := s.Position(map[int32]runtime.AckPos{0: {Next: committed}})
	s.Commit(ctx, map[int32]runtime.AckPos{0: {Next: committed}})
	want := read[committed-1].Meta[metaPGKey]
	if read[committed-1].Meta[metaPGTable] != "orders" || !strings.Contains(pos.Mode, `"k":["`+want+`"]`) {
		t.Fatalf("checkpoint %s, want the mark of orders key %s", pos.Mode, want)
	}
	srv.Kill(t)
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(300 * time.Millisecond)
		srv.Start(t)
	}()
	// The next page meets the dead connection; the source reconnects.
	first := next()
	<-restarted
	if len(first) == 0 {
		t.Fatal("nothing read after the reconnect")
	}
	if len(rec.with("snapshot reconnected")) == 0 {
		t.Fatal("no reconnect logged")
	}
	r := first[0]
	if got, wantKey := r.Meta[metaPGKey], read[committed].Meta[metaPGKey]; got != wantKey || r.Meta[metaPGTable] != "orders" {
		t.Fatalf("after the reconnect the first row is %s %s, want orders %s: the row after the committed one", r.Meta[metaPGTable], got, wantKey)
	}
	if r.Seq != uint64(handed) {
		t.Errorf("first Seq after the reconnect %d, want %d (Seq goes on)", r.Seq, handed)
	}
	if r.MessageID() != read[committed].MessageID() {
		t.Errorf("the row read again has message_id %s, its first read %s", r.MessageID(), read[committed].MessageID())
	}
	// The checkpoint is never past the last committed row: nothing more
	// committed, it stays; everything read before the loss committed, it
	// is at most the last of those; a row read again committed, at it.
	for _, c := range []struct {
		next uint64
		max  string
	}{{committed, want}, {uint64(handed), read[handed-1].Meta[metaPGKey]}, {uint64(handed) + 10, first[9].Meta[metaPGKey]}} {
		pos, _ = s.Position(map[int32]runtime.AckPos{0: {Next: c.next}})
		m, err := parseSnapshotMode(pos.Mode)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := strconv.Atoi(strings.Join(m.Key, ""))
		limit, _ := strconv.Atoi(c.max)
		if m.Table != "orders" || got > limit {
			t.Errorf("checkpoint %s with records up to Seq %d committed, past the last committed row (orders %s)", pos.Mode, c.next-1, c.max)
		}
	}
	// A change after the restart: streamed once the snapshot is read.
	if _, err := c.Exec(context.Background(), `INSERT INTO orders VALUES (7, 7, 'after the restart')`); err != nil {
		// The test's connection died with the server: a new one.
		pgExecURL(t, url, `INSERT INTO orders VALUES (7, 7, 'after the restart')`)
	}
	lo, _ := strconv.Atoi(read[committed].Meta[metaPGKey])
	hi, _ := strconv.Atoi(read[handed-1].Meta[metaPGKey])
	snapKeys := map[string]int{}
	for _, r := range read {
		snapKeys[r.Meta[metaPGTable]+" "+r.Meta[metaPGKey]]++
	}
	var streamed *runtime.Record
	for streamed == nil {
		for _, r := range next() {
			switch r.Meta[metaPGOperation] {
			case opSnapshot:
				snapKeys[r.Meta[metaPGTable]+" "+r.Meta[metaPGKey]]++
			default:
				streamed = &r
			}
		}
	}
	if streamed.Meta[metaPGKey] != "7" || streamed.Meta[metaPGOperation] != "insert" {
		t.Errorf("streamed %s %s, want the insert of 7", streamed.Meta[metaPGOperation], streamed.Meta[metaPGKey])
	}
	twice := 0
	for k, n := range snapKeys {
		if n > 1 {
			twice++
			id, _ := strconv.Atoi(strings.TrimPrefix(k, "orders "))
			if id < lo || id > hi {
				t.Errorf("%s read %d times: only the rows handed over and not committed are read again", k, n)
			}
		}
	}
	if len(snapKeys) != orders+snapLines || twice != handed-committed {
		t.Errorf("the snapshot read %d rows (%d of them twice), want %d (%d twice)", len(snapKeys), twice, orders+snapLines, handed-committed)
	}
	if got := slotConfirmed(t, url, slot); got != start {
		t.Errorf("slot confirmed at %s before the snapshot was committed, want its start %s", got, start)
	}
}

// pgExecURL runs q on a connection of its own to url.
func pgExecURL(t *testing.T, url, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, q).ReadAll(); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", q, err))
	}
}

// TestPostgresCDCSnapshotUnhealable: the snapshot's connections are cut
// while it is read and the answer to the reconnect cannot heal by
// retrying: the route stops (Next fails) with an error naming the slot,
// instead of retrying for ever.
func TestPostgresCDCSnapshotUnhealable(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, url, slot, role string) // as the superuser, at url
		says string
	}{
		{name: "login_refused", says: "not permitted to log in", cut: func(t *testing.T, url, _, role string) {
			pgExecURL(t, url, `ALTER ROLE `+role+` NOLOGIN`)
			pgExecURL(t, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`)
		}},
		{name: "slot_dropped", says: "is gone", cut: func(t *testing.T, url, slot, role string) {
			pgExecURL(t, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`)
			deadline := time.Now().Add(30 * time.Second)
			for !dropSlot(url, slot) {
				if time.Now().After(deadline) {
					t.Fatalf("could not drop slot %s", slot)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}},
		{name: "publication_dropped", says: "publication mqb_pub does not exist", cut: func(t *testing.T, url, _, role string) {
			pgExecURL(t, url, `DROP PUBLICATION mqb_pub`)
			pgExecURL(t, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testsrv.Postgres(t)
			snapshotDB(t, url, 3000)
			var db string
			plantest.PGQuery(t, url, `SELECT current_database()`, func(t *testing.T, rows plantest.Rows) int {
				for rows.Next() {
					rows.Scan(&db)
				}
				return 0
			})
			role, slot := db+"_snap", "mqb_snapunhealable_"+tc.name+"_"+db[len(db)-1:]
			// A superuser of its own (the snapshot's catalog queries
			// need more than SELECT on the tables), to refuse its login.
			pgExecURL(t, url, `CREATE ROLE `+role+` LOGIN SUPERUSER`)
			t.Cleanup(func() {
				ctx := context.Background()
				if c, err := pgconn.Connect(ctx, url); err == nil {
					c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '`+role+`'`).ReadAll()
					dropSlot(url, slot)
					c.Exec(ctx, `DROP ROLE IF EXISTS `+role).ReadAll()
					c.Close(ctx)
				}
			})
			roleURL := strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1)
			s := &pgCDCSource{route: "snap", node: "n0", log: plantest.Logger(), rawURL: roleURL, url: roleURL,
				publication: "mqb_pub", slot: slot, keepCP: true, snapshot: true, silence: silenceTimeout,
				recs: make(chan []runtime.Record, 64), errs: make(chan error, 1), done: make(chan struct{}),
				relation: map[uint32]*pglogrepl.RelationMessage{}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.Open(ctx, checkpoint.Position{}, false, nil); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if b, _, err := s.Next(ctx, 100); err != nil || b.Len() == 0 {
				t.Fatalf("first batch: %v", err)
			}
			tc.cut(t, url, slot, role)
			for {
				_, _, err := s.Next(ctx, 1000)
				if ctx.Err() != nil {
					t.Fatal("the source did not stop")
				}
				if err == nil {
					continue // the rest of the page read before the cut
				}
				if !strings.Contains(err.Error(), "slot "+slot) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("Next failed with %v, want an error naming slot %s and saying %q", err, slot, tc.says)
				}
				t.Logf("stopped: %v", err)
				return
			}
		})
	}
}

// dropSlot drops the slot (true), or says it could not (false): it is
// still active, or the connection failed. A slot already gone is dropped.
func dropSlot(url, slot string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgconn.Connect(ctx, url)
	if err != nil {
		return false
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '`+slot+`'`).ReadAll()
	return err == nil
}

// TestPostgresCDCSnapshotReplicationCut: the replication connection,
// idle while the snapshot is read (its exported snapshot imported into
// the snapshot's transaction), is cut mid-snapshot. The snapshot reads on
// to its end, and the stream then reconnects and starts at the slot's
// start: a change made meanwhile streams after the snapshot rows.
func TestPostgresCDCSnapshotReplicationCut(t *testing.T) {
	url := testsrv.Postgres(t)
	const orders = 3000
	snapshotDB(t, url, orders)
	var db string
	plantest.PGQuery(t, url, `SELECT current_database()`, func(t *testing.T, rows plantest.Rows) int {
		for rows.Next() {
			rows.Scan(&db)
		}
		return 0
	})
	slot := "mqb_snapcut_" + db[len(db)-1:]
	rec := newLogRecorder()
	s := &pgCDCSource{route: "snap", node: "n0", log: slog.New(rec), rawURL: url, url: url,
		publication: "mqb_pub", slot: slot, keepCP: true, snapshot: true, silence: silenceTimeout,
		recs: make(chan []runtime.Record, 64), errs: make(chan error, 1), done: make(chan struct{}),
		relation: map[uint32]*pglogrepl.RelationMessage{}}
	t.Cleanup(func() { dropSlot(url, slot) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Open(ctx, checkpoint.Position{}, false, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, _, err := s.Next(ctx, 100); err != nil || b.Len() == 0 {
		t.Fatalf("first batch: %v", err)
	}
	pgExecURL(t, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'walsender' AND datname = current_database()`)
	pgExecURL(t, url, `INSERT INTO orders VALUES (7, 7, 'while the snapshot is read')`)
	keys := map[string]bool{}
	for {
		b, _, err := s.Next(ctx, 1000)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatal("the change never streamed")
		}
		done := false
		for _, r := range b.Records() {
			if r.Meta[metaPGOperation] == opSnapshot {
				keys[r.Meta[metaPGTable]+" "+r.Meta[metaPGKey]] = true
				continue
			}
			if r.Meta[metaPGKey] != "7" || r.Meta[metaPGOperation] != "insert" {
				t.Fatalf("streamed %s %s, want the insert of 7", r.Meta[metaPGOperation], r.Meta[metaPGKey])
			}
			done = true
		}
		if done {
			break
		}
	}
	if len(keys) < orders+snapLines-100 { // the first batch is not counted
		t.Errorf("the snapshot read %d rows after the cut, want the rest of %d", len(keys), orders+snapLines)
	}
	if len(rec.with("replication reconnected")) == 0 {
		t.Error("the stream did not reconnect: the cut did not reach it")
	}
}
