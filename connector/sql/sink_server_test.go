package sql

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

const (
	pgOrdersDDL = `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, body TEXT)`
	myOrdersDDL = `CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY, amount BIGINT NOT NULL, body TEXT)`
)

// sqlServerPlan is file → id → (dedup) → dlq → sql on a server url
// (plantest.SQLServerPlan) over e's paths.
func sqlServerPlan(e testEnv, url, ddl, conflict string, batch, concurrency int, withDedup bool) plan.Plan {
	return plantest.SQLServerPlan(e.input, e.state, e.dedup, e.dlq, url, ddl, conflict, batch, concurrency, withDedup)
}

// appendTypeErrors adds lines whose amount the database refuses as a value
// of the wrong type (a row-level error the client cannot see coming).
func appendTypeErrors(t *testing.T, e testEnv, ds *dataset, n int) {
	f, err := os.OpenFile(e.input, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range n {
		pos := uint64(ds.Records)
		fmt.Fprintf(f, `{"order_id": "t-%d", "amount": "twelve", "body": "type error"}`+"\n", i)
		ds.Bad[pos] = true
		ds.Records++
	}
}

// sqlRows is what database/sql's and pgx's rows have in common.
type sqlRows = plantest.Rows

// scanOrderRows reads rows of (id, amount) into a map, failing on a repeat.
func scanOrderRows(t *testing.T, rows sqlRows) map[string]int {
	t.Helper()
	return scanPairs[int](t, rows)
}

// pgQuery runs a query on a fresh connection and hands its rows to scan.
func pgQuery[T any](t *testing.T, url, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	return plantest.PGQuery(t, url, query, scan)
}

func myQuery[T any](t *testing.T, dsn, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	return sqlQuery(t, "mysql", dsn, query, scan)
}

type sqlServerCase struct {
	name     string
	db       func(t *testing.T) (url string, orders func() map[string]int)
	ddl      string
	conflict string
}

var sqlServerCases = []sqlServerCase{
	{"postgres", func(t *testing.T) (string, func() map[string]int) {
		u := testsrv.Postgres(t)
		return u, func() map[string]int { return pgQuery(t, u, `SELECT id, amount FROM orders`, scanOrderRows) }
	}, pgOrdersDDL, "ON CONFLICT (id) DO NOTHING"},
	{"mariadb", func(t *testing.T) (string, func() map[string]int) {
		d := testsrv.MariaDBDatabase(t)
		return d.URL, func() map[string]int { return myQuery(t, d.DSN, `SELECT id, amount FROM orders`, scanOrderRows) }
	}, myOrdersDDL, "ON DUPLICATE KEY UPDATE id = id"},
}

// Duplicates are absorbed by the conflict clause (no dedup step), bad rows
// (NULL into NOT NULL, a string into an integer column) reach the DLQ once
// each, and a second run over the same input changes nothing.
func TestSQLServerSinkExactlyOnce(t *testing.T) {
	for _, tc := range sqlServerCases {
		t.Run(tc.name, func(t *testing.T) {
			url, orders := tc.db(t)
			e := newTestEnv(t)
			ds := genDataset(t, e.input, 20000, 3)
			appendTypeErrors(t, e, &ds, 5)
			for run := range 2 {
				if run == 1 {
					os.RemoveAll(e.state) // replay everything
				}
				start := time.Now()
				rs := runRoute(t, sqlServerPlan(e, url, tc.ddl, tc.conflict, 500, 1, false), "orders")
				t.Logf("run %d: %+v in %v", run, rs, time.Since(start))
			}
			checkOrderRows(t, orders(), ds, true)
			checkDLQ(t, readDLQ(t, e.dlq), ds.Bad, false)
		})
	}
}

// The mqb process is SIGKILLed at random moments and restarted: every
// valid record ends in the table exactly once, every bad one in the DLQ.
func TestCrashSQLServerExactlyOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, tc := range sqlServerCases {
		t.Run(tc.name, func(t *testing.T) {
			url, orders := tc.db(t)
			e := newTestEnv(t)
			const seed = 31
			ds := genDataset(t, e.input, 150000, seed)
			appendTypeErrors(t, e, &ds, 3)
			p := withRetry(sqlServerPlan(e, url, tc.ddl, tc.conflict, 512, 2, true), 20)
			st := crashAndFinish(t, bin, p, e.dir, seed, 4)
			rs := st.Route("orders")
			checkCounts(t, rs)
			t.Logf("final run %+v", rs)
			if rs.Committed != int64(ds.Records) {
				t.Errorf("final run committed %d of %d", rs.Committed, ds.Records)
			}
			// Two sink workers may write a repeat's batch before its
			// original's: which amount wins is not fixed, the key is.
			checkOrderRows(t, orders(), ds, false)
			checkDLQ(t, readDLQ(t, e.dlq), ds.Bad, false)
		})
	}
}

// The database server stops for a few seconds mid-run: the retry step
// writes the failed batches again on fresh connections and nothing is lost
// or doubled.
func TestSQLServerSinkServerRestart(t *testing.T) {
	type server struct {
		name, ddl, conflict string
		start               func(t *testing.T) (url string, count func() int, orders func() map[string]int, restart func())
	}
	count := func(t *testing.T, rows sqlRows) int {
		n := 0
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	for _, tc := range []server{
		{"postgres", pgOrdersDDL, "ON CONFLICT (id) DO NOTHING", func(t *testing.T) (string, func() int, func() map[string]int, func()) {
			srv := testsrv.NewPostgres(t)
			u := srv.NewDatabase(t).URL
			pgQuery(t, u, pgOrdersDDL, func(*testing.T, sqlRows) any { return nil })
			return u, func() int { return pgQuery(t, u, `SELECT count(*) FROM orders`, count) },
				func() map[string]int { return pgQuery(t, u, `SELECT id, amount FROM orders`, scanOrderRows) },
				func() { srv.Restart(t, 3*time.Second) }
		}},
		{"mariadb", myOrdersDDL, "ON DUPLICATE KEY UPDATE id = id", func(t *testing.T) (string, func() int, func() map[string]int, func()) {
			srv := testsrv.NewMariaDB(t)
			d := srv.NewDatabase(t)
			myQuery(t, d.DSN, myOrdersDDL, func(*testing.T, sqlRows) any { return nil })
			return d.URL, func() int { return myQuery(t, d.DSN, `SELECT count(*) FROM orders`, count) },
				func() map[string]int { return myQuery(t, d.DSN, `SELECT id, amount FROM orders`, scanOrderRows) },
				func() { srv.Restart(t, 3*time.Second) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, rowCount, orders, restart := tc.start(t)
			e := newTestEnv(t)
			// The server restarts once a tenth of the rows are in: the
			// rest are written through and after the restart.
			ds := genDataset(t, e.input, 20000, 5)
			p := withRetry(sqlServerPlan(e, url, tc.ddl, tc.conflict, 256, 2, false), 100)
			done := make(chan error, 1)
			var stats runtime.Stats
			go func() {
				var err error
				stats, err = runtime.Run(context.Background(), p, testOptions(t))
				done <- err
			}()
			deadline := time.Now().Add(time.Minute)
			for rowCount() < len(ds.IDs)/10 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			before := rowCount()
			restart()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			rs := stats.Route("orders")
			checkCounts(t, rs)
			t.Logf("restarted after %d rows; %+v", before, rs)
			if before >= len(ds.IDs) {
				t.Errorf("the run was over before the restart (%d rows)", before)
			}
			checkOrderRows(t, orders(), ds, false)
			checkDLQ(t, readDLQ(t, e.dlq), ds.Bad, false)
		})
	}
}

// newServerSinkForTest builds the sql sink of a bare node.
func newServerSinkForTest(t *testing.T, attrs map[string]plan.Value) (runtime.Sink, error) {
	t.Helper()
	n := &plan.Node{ID: "n", Role: plan.RoleSink, Kind: "sql", Attrs: attrs}
	s, err := runtime.BuildSink(context.Background(), "r", "json", n, runtime.Options{})
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// valueRecord is a record with message_id id and the decoded payload v.
func valueRecord(id string, v any) *runtime.Record {
	r := &runtime.Record{Meta: map[string]string{runtime.MetaID: id}}
	r.SetPayload(nil, v)
	return r
}

func outcomeRecs(ids ...string) []*runtime.Record {
	var recs []*runtime.Record
	for i, id := range ids {
		recs = append(recs, valueRecord(id, map[string]any{"amount": int64(i)}))
	}
	return recs
}

// report_outcome: a new key reads inserted, a repeat existed, on both
// servers; a refused row has no outcome and its own error.
func TestSQLServerSinkReportOutcome(t *testing.T) {
	for _, tc := range sqlServerCases {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := tc.db(t)
			s, err := newServerSinkForTest(t, map[string]plan.Value{
				"url": strV(url), "create_table": strV(tc.ddl), "report_outcome": {Type: plan.TBool, Bool: true},
				"insert_query": tmplV(lit("INSERT INTO orders (id, amount) VALUES ("), ex(`meta["mqb.id"]`), lit(", "), ex("payload.amount"), lit(") "+tc.conflict))})
			if err != nil {
				t.Fatal(err)
			}
			recs := outcomeRecs("a", "b", "a", "c")
			recs[3].SetPayload(nil, map[string]any{"amount": nil})
			if err := s.Write(context.Background(), recs); err != nil {
				t.Fatal(err)
			}
			recs2 := outcomeRecs("b", "d")
			if err := s.Write(context.Background(), recs2); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range append(recs, recs2...) {
				got = append(got, r.Meta[metaSQLOutcome]+"/"+fmt.Sprint(r.Refused() != ""))
			}
			want := []string{"inserted/false", "inserted/false", "existed/false", "/true", "existed/false", "inserted/false"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outcomes %v, want %v (refused row: %s)", got, want, recs[3].Refused())
			}
		})
	}
}

// bulk_copy loads plain inserts with COPY; a batch COPY refuses falls back
// to the inserts, which dead-letter just the bad row.
func TestPostgresSinkBulkCopy(t *testing.T) {
	url := testsrv.Postgres(t)
	s, err := newServerSinkForTest(t, map[string]plan.Value{
		"url": strV(url), "create_table": strV(pgOrdersDDL), "bulk_copy": {Type: plan.TBool, Bool: true},
		"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
			ex("payload.amount"), lit(", "), ex("payload.body"), lit(")"))})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*runtime.Record
	for i := range 5000 { // more than one read of the COPY data
		recs = append(recs, valueRecord(fmt.Sprintf("k%d", i),
			map[string]any{"amount": int64(i), "body": "tab\there\nnew line \\ back\r"}))
	}
	if err := s.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	bad := outcomeRecs("x", "y", "z")
	bad[1].SetPayload(nil, map[string]any{"amount": "not a number"})
	if err := s.Write(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if bad[0].Refused() != "" || bad[1].Refused() == "" || bad[2].Refused() != "" {
		t.Errorf("sinkErr %q %q %q: want only the second refused", bad[0].Refused(), bad[1].Refused(), bad[2].Refused())
	}
	got := pgQuery(t, url, `SELECT id, amount FROM orders`, scanOrderRows)
	if len(got) != 5002 {
		t.Errorf("%d rows, want 5002", len(got))
	}
	body := pgQuery(t, url, `SELECT body FROM orders WHERE id = 'k7'`, func(t *testing.T, rows sqlRows) (s string) {
		for rows.Next() {
			rows.Scan(&s)
		}
		return s
	})
	if body != "tab\there\nnew line \\ back\r" {
		t.Errorf("body %q came back changed", body)
	}
	_, err = newServerSinkForTest(t, map[string]plan.Value{
		"url": strV(url), "bulk_copy": {Type: plan.TBool, Bool: true},
		"insert_query": tmplV(lit("INSERT INTO orders (id) VALUES (lower("), ex(`meta["mqb.id"]`), lit("))"))})
	if err == nil || !strings.Contains(err.Error(), "bulk_copy") {
		t.Errorf("err %v: want bulk_copy refused for an insert COPY cannot express", err)
	}
}

// Passwords stay out of errors; a wrong query is reported at start-up
// naming the attribute.
func TestSQLServerSinkErrors(t *testing.T) {
	for _, u := range []string{"postgres://mqb:s3cret@127.0.0.1:1/db?connect_timeout=2", "mysql://mqb:s3cret@127.0.0.1:1/db?timeout=2s"} {
		_, err := newServerSinkForTest(t, map[string]plan.Value{"url": strV(u),
			"insert_query": tmplV(lit("INSERT INTO t (a) VALUES ("), ex("payload.a"), lit(")"))})
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "route r") || !strings.Contains(err.Error(), "attribute url") {
			t.Errorf("err %v: want an error naming route and attribute, without the password", err)
		}
	}
	url := testsrv.Postgres(t)
	_, err := newServerSinkForTest(t, map[string]plan.Value{"url": strV(url),
		"insert_query": tmplV(lit("INSERT INTO missing (a) VALUES ("), ex("payload.a"), lit(")"))})
	if err == nil || !strings.Contains(err.Error(), "attribute insert_query") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("err %v: want the prepare error on insert_query", err)
	}
}
