package postgrescdc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestPostgresCDCKeylessRowsApart: rows one transaction inserts into a
// table whose replica identity is no key (a table without a primary
// key; REPLICA IDENTITY FULL, whose key is the whole row, with two equal
// rows) get a message_id each, so a dedup on message_id (the default key)
// and a sink keyed on it keep every one; they all shared one before. A
// key changed twice in one transaction still gives one id, as the spec
// says (TestPostgresCDCSameKeyTwiceInOneTransaction). The ids are the
// same when the changes are read again: a second route on a second slot
// created before them reads the same ids.
func TestPostgresCDCKeylessRowsApart(t *testing.T) {
	url := testsrv.Postgres(t)
	ctx := context.Background()
	c := connect(t, url)
	exec(t, c,
		`CREATE TABLE logs (line TEXT)`,
		`CREATE TABLE full_rows (a INTEGER, b TEXT)`,
		`ALTER TABLE full_rows REPLICA IDENTITY FULL`,
		`CREATE TABLE keyed (id INTEGER PRIMARY KEY, v TEXT)`,
		`CREATE TABLE ev (id TEXT PRIMARY KEY, tbl TEXT, body TEXT)`,
		`CREATE TABLE ev2 (id TEXT PRIMARY KEY, tbl TEXT, body TEXT)`,
		`CREATE PUBLICATION keyless_pub FOR TABLE logs, full_rows, keyed`,
		`SELECT pg_create_logical_replication_slot('keyless_a', 'pgoutput')`,
		`SELECT pg_create_logical_replication_slot('keyless_b', 'pgoutput')`)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO logs VALUES ('one'), ('two'), ('three')`,
		`INSERT INTO full_rows VALUES (1, 'same'), (1, 'same'), (2, 'other')`,
		`INSERT INTO keyed VALUES (1, 'first')`,
		`UPDATE keyed SET v = 'second' WHERE id = 1`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	const want = 3 + 3 + 1 // the keyed row's insert and update share an id
	ids := map[string]string{}
	for _, run := range []struct{ slot, table string }{{"keyless_a", "ev"}, {"keyless_b", "ev2"}} {
		_, r := startCompiled(t, fmt.Sprintf(`route r {
  from postgres_cdc { url = %q, publication = "keyless_pub", slot_name = %q }
  dedup { ttl = 1h, store = "pebble://dedup" }
  to sql {
    url          = %q
    insert_query = "INSERT INTO %s (id, tbl, body) VALUES (${message_id}, ${meta[\"postgres.table\"]}, ${payload}) ON CONFLICT (id) DO NOTHING"
  }
}`, url, run.slot, url, run.table), nil)
		var got map[string]string
		waitUntil(func() bool {
			got = plantest.PGQuery(t, url, `SELECT id, tbl || ' ' || body FROM `+run.table, func(t *testing.T, rows plantest.Rows) map[string]string {
				out := map[string]string{}
				for rows.Next() {
					var id, v string
					rows.Scan(&id, &v)
					out[id] = v
				}
				return out
			})
			return len(got) >= want
		})
		time.Sleep(300 * time.Millisecond) // nothing more comes
		rs := r.Stop(t).Route("r")
		if len(got) != want {
			t.Fatalf("%s: %d rows, want %d: %v (route %+v)", run.slot, len(got), want, got, rs)
		}
		if run.table == "ev" {
			ids = got
		} else {
			for id, v := range got {
				if ids[id] != v {
					t.Errorf("read again from %s, %s is %q; from the first slot %q", run.slot, id, v, ids[id])
				}
			}
		}
	}
}
