package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// TestSQLCursorSourceWaitsForRowsInFlight: a transaction takes id 1 and
// is still open while another commits ids 2 and 3, so the first pages
// show 2 and 3 but not 1. Paging on past 3 would skip row 1 for good when
// its transaction commits, in a clean run, with the route reporting
// nothing lost. The source waits for the open transaction before it
// passes on rows above it, and the copy ends with all three rows. A
// transaction writing another table does not hold the source up.
func TestSQLCursorSourceWaitsForRowsInFlight(t *testing.T) {
	type backend struct {
		name      string
		url       string
		exec      func(q string)
		begin     func(q string) (commit func())
		count     func(table string) int
		ids       func() []int
		src, sink string
		upsert    string
	}
	count := func(t *testing.T, rows sqlRows) (n int) {
		for rows.Next() {
			rows.Scan(&n)
		}
		return n
	}
	ids := func(t *testing.T, rows sqlRows) (out []int) {
		for rows.Next() {
			var n int
			rows.Scan(&n)
			out = append(out, n)
		}
		sort.Ints(out)
		return out
	}
	backends := []func(t *testing.T) backend{
		func(t *testing.T) backend {
			u := testsrv.Postgres(t)
			return backend{name: "postgres", url: u,
				exec: func(q string) {
					if err := pgExec(u, q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				},
				begin: func(q string) func() {
					ctx := context.Background()
					c, err := pgx.Connect(ctx, u)
					if err != nil {
						t.Fatal(err)
					}
					tx, err := c.Begin(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := tx.Exec(ctx, q); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close(ctx) })
					return func() {
						if err := tx.Commit(ctx); err != nil {
							t.Error(err)
						}
					}
				},
				count:  func(tb string) int { return pgQuery(t, u, `SELECT count(*) FROM `+tb, count) },
				ids:    func() []int { return pgQuery(t, u, `SELECT id FROM copy`, ids) },
				src:    `CREATE TABLE src (id BIGSERIAL PRIMARY KEY, amount INTEGER, body TEXT)`,
				sink:   `CREATE TABLE IF NOT EXISTS copy (id BIGINT PRIMARY KEY, amount INTEGER, body TEXT, msg TEXT)`,
				upsert: `ON CONFLICT (id) DO NOTHING`}
		},
		func(t *testing.T) backend {
			d := testsrv.MariaDBDatabase(t)
			return backend{name: "mariadb", url: d.URL,
				exec: func(q string) { execEach(t, "mysql", d.DSN, []string{q}) },
				begin: func(q string) func() {
					db, err := dbsql.Open("mysql", d.DSN)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { db.Close() })
					tx, err := db.Begin()
					if err != nil {
						t.Fatal(err)
					}
					if _, err := tx.Exec(q); err != nil {
						t.Fatal(err)
					}
					return func() {
						if err := tx.Commit(); err != nil {
							t.Error(err)
						}
					}
				},
				count:  func(tb string) int { return myQuery(t, d.DSN, `SELECT count(*) FROM `+tb, count) },
				ids:    func() []int { return myQuery(t, d.DSN, `SELECT id FROM copy`, ids) },
				src:    `CREATE TABLE src (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount INTEGER, body TEXT)`,
				sink:   `CREATE TABLE IF NOT EXISTS copy (id BIGINT PRIMARY KEY, amount INTEGER, body TEXT, msg VARCHAR(64))`,
				upsert: `ON DUPLICATE KEY UPDATE id = id`}
		},
	}
	for _, newDB := range backends {
		db := newDB(t)
		t.Run(db.name, func(t *testing.T) {
			db.exec(db.src)
			db.exec(db.sink)
			db.exec(`CREATE TABLE other (id INTEGER)`)
			commitFirst := db.begin(`INSERT INTO src (amount, body) VALUES (1, 'taken first, committed last')`)
			db.exec(`INSERT INTO src (amount, body) VALUES (2, 'second')`)
			db.exec(`INSERT INTO src (amount, body) VALUES (3, 'third')`)
			// A transaction on another table, open all along: on
			// PostgreSQL the source does not wait for it.
			var commitOther func()
			if db.name == "postgres" {
				commitOther = db.begin(`INSERT INTO other VALUES (1)`)
			}
			e := newTestEnv(t)
			p := cursorPlan(e, cursorDB{url: db.url, sinkDDL: db.sink, upsert: db.upsert},
				map[string]plan.Value{"table": strV("src"), "cursor_column": strV("id")})
			p.Routes[0].Concurrency = 1
			started := time.Now()
			committed := false
			st := runtest.RunUntil(t, p, testOptions(t), time.Minute, func() bool {
				if !committed && time.Since(started) > 1500*time.Millisecond {
					// Several polls have seen rows 2 and 3 by now.
					if n := db.count("copy"); n != 0 {
						t.Errorf("%d rows copied while the transaction that took id 1 was open, want 0 (rows past it wait for it)", n)
					}
					commitFirst()
					committed = true
				}
				return committed && db.count("copy") == 3
			})
			t.Logf("stats %+v", st.Route("cursor"))
			if got := fmt.Sprint(db.ids()); got != "[1 2 3]" {
				t.Errorf("copied ids %s, want [1 2 3]", got)
			}
			if commitOther != nil {
				commitOther()
			}
		})
	}
}
