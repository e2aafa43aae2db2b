package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: mqbc check builds the routes and reports each (premises or
// none) without moving a record; a route that cannot start fails it.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "in.jsonl", `{"id": "a"}`+"\n")
	write(t, dir, "ok.mqb", `route copy {
  from file { path = "in.jsonl" }
  to file { path = "out.jsonl" }
}
`)
	out, errOut, code := mqbc(t, dir, "check", "ok.mqb")
	if code != 0 || !strings.Contains(out, "ok     copy: no premises to check") {
		t.Fatalf("check ok.mqb: exit %d\n%s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.jsonl")); err == nil && len(b) > 0 {
		t.Errorf("check wrote %q to the sink's file: it must move no record", b)
	}
	write(t, dir, "bad.mqb", `route load {
  from file { path = "in.jsonl" }
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT INTO missing (id) VALUES (${payload.id}) ON CONFLICT DO NOTHING"
  }
}
`)
	out, errOut, code = mqbc(t, dir, "check", "bad.mqb")
	if code != 1 || !strings.Contains(out, "FAILED load:") || !strings.Contains(out, "no such table: missing") {
		t.Fatalf("check bad.mqb: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRunRefusesFailedPremise: the compiler's unique-key premise, checked
// by `mqbc run` against a SQLite table without the index, refuses the
// route before a record moves, naming the fix; with the index, check says
// ok and a record whose key column would be NULL is dead-lettered.
func TestRunRefusesFailedPremise(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "out.db")
	exec := func(q string) {
		t.Helper()
		conn, err := sql.Open("sqlite3", "file:"+db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE TABLE orders (id TEXT, v INT)")
	write(t, dir, "in.jsonl", `{"id": "a", "v": 1}`+"\n"+`{"v": 2}`+"\n")
	write(t, dir, "r.mqb", `route orders_to_db {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT OR IGNORE INTO orders (id, v) VALUES (${payload.id}, ${payload.v})"
  }
}
`)
	out, errOut, code := mqbc(t, dir, "run", "r.mqb")
	if code != 1 || !strings.Contains(errOut, "refused before the first record") ||
		!strings.Contains(errOut, "table orders has no UNIQUE or PRIMARY KEY index") ||
		!strings.Contains(errOut, "fix: CREATE UNIQUE INDEX orders_id_v ON orders (id, v)") {
		t.Fatalf("run without the index: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "in 1") || strings.Contains(out, "in 2") {
		t.Errorf("a refused route read records:\n%s", out)
	}
	out, errOut, code = mqbc(t, dir, "check", "r.mqb")
	if code != 1 || !strings.Contains(out, "FAILED orders_to_db: start-up unique_key") {
		t.Fatalf("check without the index: exit %d\n%s%s", code, out, errOut)
	}

	exec("CREATE UNIQUE INDEX orders_id ON orders (id)")
	write(t, dir, "r.mqb", `route orders_to_db {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT INTO orders (id, v) VALUES (${payload.id}, ${payload.v}) ON CONFLICT (id) DO NOTHING"
  }
}
`)
	out, errOut, code = mqbc(t, dir, "check", "r.mqb")
	if code != 0 || !strings.Contains(out, "ok     orders_to_db: start-up unique_key") || !strings.Contains(out, "ok     orders_to_db: per-record key_present") {
		t.Fatalf("check with the index: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "run", "r.mqb")
	if code != 0 || !strings.Contains(out, "out 1") || !strings.Contains(out, "dead-lettered 1") {
		t.Fatalf("run with the index: exit %d\n%s%s", code, out, errOut)
	}
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil || !strings.Contains(string(dlq), "key column id would be NULL") {
		t.Errorf("DLQ %s (%v): want the NULL key reason", dlq, err)
	}
}
