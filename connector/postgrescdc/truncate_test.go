package postgrescdc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestPostgresCDCTruncate: a TRUNCATE of a published table is a record
// (postgres.operation truncate, one per table, {} as the payload), where
// it was dropped without a word and the warehouse kept the rows the
// source no longer had. Into an upsert keyed on the row's id it goes to
// the DLQ, saying why; the changes around it go through in order.
func TestPostgresCDCTruncate(t *testing.T) {
	url := testsrv.Postgres(t)
	exec(t, connect(t, url),
		`CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)`,
		`CREATE TABLE tags (id INTEGER PRIMARY KEY, name TEXT)`,
		`CREATE TABLE wh (id INTEGER PRIMARY KEY, name TEXT)`,
		`CREATE PUBLICATION trunc_pub FOR TABLE items, tags`,
		`SELECT pg_create_logical_replication_slot('trunc_file', 'pgoutput')`,
		`SELECT pg_create_logical_replication_slot('trunc_wh', 'pgoutput')`,
		`INSERT INTO items VALUES (1, 'a'), (2, 'b')`,
		`TRUNCATE items, tags`,
		`INSERT INTO items VALUES (3, 'c')`)
	dir, r := startCompiled(t, fmt.Sprintf(`route file {
  from postgres_cdc { url = %q, publication = "trunc_pub", slot_name = "trunc_file" }
  map { payload.op = meta["postgres.operation"], payload.table = meta["postgres.table"] }
  to file { path = "out.jsonl" }
}
route wh {
  from postgres_cdc { url = %q, publication = "trunc_pub", slot_name = "trunc_wh" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = %q
    insert_query = "INSERT INTO wh (id, name) VALUES (${payload.id}, ${payload.name}) ON CONFLICT (id) DO UPDATE SET name = excluded.name"
  }
}`, url, url, url), nil)
	want := []string{
		`{"id":1,"name":"a","op":"insert","table":"items"}`,
		`{"id":2,"name":"b","op":"insert","table":"items"}`,
		`{"op":"truncate","table":"items"}`,
		`{"op":"truncate","table":"tags"}`,
		`{"id":3,"name":"c","op":"insert","table":"items"}`,
	}
	var lines, dlq []string
	waitUntil(func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		lines = strings.Fields(string(data))
		data, _ = os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
		dlq = strings.Split(strings.TrimSpace(string(data)), "\n")
		return len(lines) >= len(want) && len(dlq) >= 2
	})
	time.Sleep(200 * time.Millisecond)
	r.Stop(t)
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if len(dlq) != 2 || !strings.Contains(dlq[0], "NULL") || !strings.Contains(dlq[0], `"postgres.operation":"truncate"`) {
		t.Errorf("dlq: want the two truncates, refused for their NULL key:\n%s", strings.Join(dlq, "\n"))
	}
	n := plantest.PGQuery(t, url, `SELECT count(*) FROM wh`, func(t *testing.T, rows plantest.Rows) (n int) {
		for rows.Next() {
			rows.Scan(&n)
		}
		return n
	})
	if n != 3 {
		t.Errorf("warehouse holds %d rows, want the 3 inserted", n)
	}
}
