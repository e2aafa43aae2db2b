package runtime_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/runtime"
)

// dedupFilterSQLiteSrc is seed-17352's shape on a SQLite sink: a dedup
// step, then a filter that drops some first copies of its keys. The table
// has no unique key, so a repeat the dedup lets through shows as a row.
const dedupFilterSQLiteSrc = `route orders {
  batch_size = 2
  from file { path = "in.jsonl" }
  dedup { key = payload.id, ttl = 1h }
  filter payload.qty != 3
  dlq { to file { path = "out/dlq.jsonl" } }
  to sql {
    url          = "sqlite://out/t.db"
    insert_query = """INSERT INTO t (id, qty) VALUES (${payload.id}, ${payload.qty})"""
  }
}
`

// The first copy of key a leads the first batch and is filtered; the sink
// fails that batch (its database is locked past the busy timeout), and
// the route stops. Its last commit must not pass record 0, whose key went
// back unpromoted: the rerun must see the first copy again and drop the
// repeat of a, as a run without the failure does. Before, the filtered
// record was acked by the steps, the failed route committed past it, and
// the rerun wrote the repeat.
func TestDedupFilteredFirstCopySurvivesSinkFailure(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id":"a","qty":3}`, // filtered: the first copy of a
		`{"id":"b","qty":1}`,
		`{"id":"a","qty":5}`, // a repeat of a: the dedup drops it
		`{"id":"c","qty":2}`)
	dbPath := filepath.Join(dir, "out", "t.db")
	db, err := sql.Open(plantest.SQLiteDriver, "file:"+dbPath+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id TEXT NOT NULL, qty INTEGER)`); err != nil {
		t.Fatal(err)
	}
	p := plantest.Compile(t, dedupFilterSQLiteSrc)
	opts := runtest.Options()
	opts.BaseDir = dir
	opts.StateDir = filepath.Join(dir, "state")

	// Run 1: a write transaction held here locks the sink out.
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if _, err := runtime.Run(ctx, p, opts); err == nil {
		t.Fatal("the route ran through a locked sink")
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()

	// Run 2: the sink is back.
	rs := runtest.RunRoute(t, ctx, p, opts, "orders")
	t.Logf("rerun: %+v", rs)
	ids := plantest.SQLiteIDs(t, dbPath, "t")
	if want := []string{"b", "c"}; !slices.Equal(ids, want) {
		t.Errorf("table holds %v, want %v: the repeat of a filtered first copy passed the dedup after the failed run", ids, want)
	}
}
