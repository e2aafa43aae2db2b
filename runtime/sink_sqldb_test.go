package runtime

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

const (
	pgOrdersDDL = `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, body TEXT)`
	myOrdersDDL = `CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY, amount BIGINT NOT NULL, body TEXT)`
)

// sqlServerPlan is file → id → (dedup) → dlq → sql on a server url.
func sqlServerPlan(e testEnv, url, ddl, conflict string, batch, concurrency int, withDedup bool) plan.Plan {
	p := sqlitePlan(e, batch, concurrency)
	nodes := p.Routes[0].Nodes
	sink := &nodes[len(nodes)-1]
	sink.Attrs = map[string]plan.Value{
		"url":          tmplV(lit(url)),
		"create_table": strV(ddl),
		"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`),
			lit(", "), ex("payload.amount"), lit(", "), ex("payload.body"), lit(") "+conflict)),
	}
	if !withDedup {
		nodes = append(nodes[:2:2], nodes[3:]...)
	}
	p.Routes[0].Nodes = nodes
	p.Routes[0].Edges = chain(nodes)
	return p
}

// withRetry inserts a retry step before the sink.
func withRetry(p plan.Plan, attempts int64) plan.Plan {
	retry := plan.Node{ID: "r", Role: plan.RoleStep, Kind: "retry", Side: plan.SideOutput, Attrs: map[string]plan.Value{
		"attempts": intV(attempts), "backoff": {Type: plan.TDuration, Str: "100ms", Int: int64(100 * time.Millisecond)},
		"max_backoff": {Type: plan.TDuration, Str: "1s", Int: int64(time.Second)}}}
	nodes := p.Routes[0].Nodes
	n := len(nodes)
	p.Routes[0].Nodes = append(append(nodes[:n-1:n-1], retry), nodes[n-1])
	p.Routes[0].Edges = chain(p.Routes[0].Nodes)
	return p
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
		pos := uint64(ds.records)
		fmt.Fprintf(f, `{"order_id": "t-%d", "amount": "twelve", "body": "type error"}`+"\n", i)
		ds.bad[pos] = true
		ds.records++
	}
}

// sqlRows scans rows of (text, integer) into a map, failing on a repeat.
type sqlRows interface {
	Next() bool
	Scan(...any) error
	Err() error
}

func scanOrderRows(t *testing.T, rows sqlRows) map[string]int {
	t.Helper()
	got := map[string]int{}
	for rows.Next() {
		var id string
		var amount int
		if err := rows.Scan(&id, &amount); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[id]; dup {
			t.Errorf("id %s stored twice", id)
		}
		got[id] = amount
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func checkOrderRows(t *testing.T, got map[string]int, ds dataset, exactAmounts bool) {
	t.Helper()
	if len(got) != len(ds.ids) {
		t.Errorf("table has %d rows, want %d", len(got), len(ds.ids))
	}
	missing := 0
	for id, amount := range ds.ids {
		if g, ok := got[id]; !ok {
			if missing++; missing < 10 {
				t.Errorf("id %s missing from the table", id)
			}
		} else if exactAmounts && g != amount {
			t.Errorf("id %s: amount %d, want %d", id, g, amount)
		}
	}
	if missing > 0 {
		t.Errorf("%d ids missing", missing)
	}
}

// pgQuery runs a query on a fresh connection and hands its rows to scan.
func pgQuery[T any](t *testing.T, url, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return scan(t, rows)
}

func myQuery[T any](t *testing.T, dsn, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return scan(t, rows)
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
				st, err := Run(context.Background(), sqlServerPlan(e, url, tc.ddl, tc.conflict, 500, 1, false), testOptions(t))
				if err != nil {
					t.Fatal(err)
				}
				rs := st.Route("orders")
				checkCounts(t, rs)
				t.Logf("run %d: %+v in %v", run, rs, time.Since(start))
			}
			checkOrderRows(t, orders(), ds, true)
			checkDLQ(t, readDLQ(t, e.dlq), ds.bad, false)
		})
	}
}
