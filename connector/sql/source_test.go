package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

type cursorDB struct {
	name    string
	url     string
	exec    func(q string)
	count   func(table string) int
	srcDDL  string
	sinkDDL string
	upsert  string
}

func cursorDBs() []func(t *testing.T) cursorDB {
	count := func(t *testing.T, rows sqlRows) (n int) {
		for rows.Next() {
			rows.Scan(&n)
		}
		return n
	}
	none := func(t *testing.T, rows sqlRows) any {
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	return []func(t *testing.T) cursorDB{
		func(t *testing.T) cursorDB {
			u := testsrv.Postgres(t)
			return cursorDB{name: "postgres", url: u,
				exec:    func(q string) { pgQuery(t, u, q, none) },
				count:   func(tb string) int { return pgQuery(t, u, `SELECT count(*) FROM `+tb, count) },
				srcDDL:  `CREATE TABLE src (id BIGINT PRIMARY KEY, amount INTEGER, body TEXT, tags JSONB)`,
				sinkDDL: `CREATE TABLE IF NOT EXISTS copy (id BIGINT PRIMARY KEY, amount INTEGER, body TEXT, msg TEXT)`,
				upsert:  `ON CONFLICT (id) DO NOTHING`}
		},
		func(t *testing.T) cursorDB {
			d := testsrv.MariaDBDatabase(t)
			return cursorDB{name: "mariadb", url: d.URL,
				exec:    func(q string) { myQuery(t, d.DSN, q, none) },
				count:   func(tb string) int { return myQuery(t, d.DSN, `SELECT count(*) FROM `+tb, count) },
				srcDDL:  `CREATE TABLE src (id BIGINT PRIMARY KEY, amount INTEGER, body TEXT, tags JSON)`,
				sinkDDL: `CREATE TABLE IF NOT EXISTS copy (id BIGINT PRIMARY KEY, amount INTEGER, body TEXT, msg VARCHAR(64))`,
				upsert:  `ON DUPLICATE KEY UPDATE id = id`}
		},
	}
}

func insertSrcRows(db cursorDB, from, to int) {
	var b strings.Builder
	for i := from; i < to; i++ {
		if b.Len() == 0 {
			b.WriteString(`INSERT INTO src (id, amount, body, tags) VALUES `)
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `(%d, %d, 'row %d', '{"n": %d}')`, 3*i+1, i, i, i) // ids skip values
		if (i+1-from)%1000 == 0 {
			db.exec(b.String())
			b.Reset()
		}
	}
	if b.Len() > 0 {
		db.exec(b.String())
	}
}

func cursorPlan(e testEnv, db cursorDB, srcAttrs map[string]plan.Value) plan.Plan {
	srcAttrs["url"] = strV(db.url)
	srcAttrs["checkpoint_store"] = strV("pebble://" + e.state)
	srcAttrs["poll_interval"] = plan.Value{Type: plan.TDuration, Str: "50ms", Int: int64(50 * time.Millisecond)}
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "sql", Attrs: srcAttrs},
		dlqFile("n1", e.dlq, ""),
		{ID: "n2", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url": strV(db.url), "create_table": strV(db.sinkDDL),
			"insert_query": tmplV(lit("INSERT INTO copy (id, amount, body, msg) VALUES ("), ex("payload.id"), lit(", "),
				ex("payload.amount"), lit(", "), ex("payload.body"), lit(", "), ex("message_id"), lit(") "+db.upsert))}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "cursor", Guarantee: plan.EffectivelyOnce,
		Concurrency: 2, BatchSize: 500, Nodes: nodes, Edges: chain(nodes)}}}
}

// runCursorUntil runs p until cond holds (polled), then drains it; the
// run ending before is a failure.
func runCursorUntil(t *testing.T, p plan.Plan, cond func() bool) runtime.RouteStats {
	t.Helper()
	held := false
	st := runtest.RunUntil(t, p, testOptions(t), time.Minute, func() bool {
		if held = cond(); held {
			time.Sleep(200 * time.Millisecond) // let the last commit happen before the drain
		}
		return held
	})
	if !held {
		t.Fatalf("run ended before the condition held: %+v", st)
	}
	return st.Route(p.Routes[0].Name)
}

// The cursor source copies a table, resumes after its checkpoint (reading
// only rows added since), and derives the same message_id on every read.
func TestSQLCursorSource(t *testing.T) {
	for i, newDB := range cursorDBs() {
		t.Run([]string{"postgres", "mariadb"}[i], func(t *testing.T) {
			db := newDB(t)
			db.exec(db.srcDDL)
			db.exec(db.sinkDDL)
			insertSrcRows(db, 0, 5000)
			e := newTestEnv(t)
			p := cursorPlan(e, db, map[string]plan.Value{"table": strV("src"), "cursor_column": strV("id")})
			rs := runCursorUntil(t, p, func() bool { return db.count("copy") == 5000 })
			t.Logf("first run: %+v", rs)
			insertSrcRows(db, 5000, 6000)
			rs = runCursorUntil(t, p, func() bool { return db.count("copy") == 6000 })
			t.Logf("second run: %+v", rs)
			if rs.In != 1000 {
				t.Errorf("second run read %d rows, want the 1000 new ones", rs.In)
			}
			if n := db.count("copy WHERE amount * 3 + 1 = id AND body = concat('row ', amount)"); n != 6000 {
				t.Errorf("%d rows copied intact, want 6000", n)
			}
			// Replaying from scratch derives the same message ids.
			before := db.count("copy WHERE msg IS NOT NULL")
			db.exec(`DELETE FROM copy WHERE id < 100`)
			e2 := newTestEnv(t)
			runCursorUntil(t, cursorPlan(e2, db, map[string]plan.Value{"table": strV("src"), "cursor_column": strV("id")}),
				func() bool { return db.count("copy") == 6000 })
			if n := db.count("copy WHERE msg IS NOT NULL"); n != before {
				t.Errorf("%d rows with a message id after the replay, want %d", n, before)
			}
		})
	}
}

// A cursor the source cannot use as a position fails the route at read
// time, naming the column and the value.
func TestSQLCursorSourceRejects(t *testing.T) {
	for i, newDB := range cursorDBs() {
		t.Run([]string{"postgres", "mariadb"}[i], func(t *testing.T) {
			db := newDB(t)
			db.exec(`CREATE TABLE dup (n BIGINT, body TEXT)`)
			db.exec(`INSERT INTO dup VALUES (1, 'a'), (2, 'b'), (2, 'c'), (3, 'd')`)
			db.exec(`CREATE TABLE neg (n BIGINT, body TEXT)`)
			db.exec(`INSERT INTO neg VALUES (-5, 'a')`)
			for _, tc := range []struct {
				attrs map[string]plan.Value
				want  string
			}{
				{map[string]plan.Value{"table": strV("dup"), "cursor_column": strV("n")}, "value 2 repeats"},
				{map[string]plan.Value{"query": strV("SELECT n * 1.5 AS f, body FROM dup"), "cursor_column": strV("f")}, `"1.5" is not a non-negative integer`},
				{map[string]plan.Value{"query": strV("SELECT n - 10 AS m FROM dup"), "cursor_column": strV("m")}, `is not a non-negative integer`},
				{map[string]plan.Value{"table": strV("missing"), "cursor_column": strV("n")}, "missing"},
			} {
				e := newTestEnv(t)
				p := cursorPlan(e, db, tc.attrs)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				_, err := runtime.Run(ctx, p, testOptions(t))
				cancel()
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "route cursor") {
					t.Errorf("%v: err %v, want one naming the route and %q", tc.attrs, err, tc.want)
				}
			}
		})
	}
}

// Cursor values far apart (ids from a sparse sequence) page and resume
// like dense ones.
func TestSQLCursorSourceSparseIDs(t *testing.T) {
	db := cursorDBs()[0](t)
	db.exec(db.srcDDL)
	db.exec(db.sinkDDL)
	db.exec(`INSERT INTO src (id, amount, body) SELECT i::bigint * 1000003 + (i % 7) * 65537, i, 'row ' || i FROM generate_series(0, 4999) i`)
	if n := db.count("src"); n != 5000 {
		t.Fatalf("src has %d rows", n)
	}
	e := newTestEnv(t)
	p := cursorPlan(e, db, map[string]plan.Value{"table": strV("src"), "cursor_column": strV("id")})
	p.Routes[0].BatchSize = 64
	rs := runCursorUntil(t, p, func() bool { return db.count("copy") == 5000 })
	checkCounts(t, rs)
	t.Logf("first run: %+v", rs)
	db.exec(`INSERT INTO src (id, amount, body) VALUES (9000000000000, 1, 'far')`)
	rs = runCursorUntil(t, p, func() bool { return db.count("copy") == 5001 })
	if rs.In != 1 {
		t.Errorf("resumed run read %d rows, want the 1 new one", rs.In)
	}
}
