package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// mapTextRoute is the route that once dead-lettered every record: a text
// file whose lines a map wraps into an object. It then nests, deletes and
// sets a meta key, and keys the rows on the line.
const mapTextRoute = `route lines {
  guarantee effectively_once
  from file { path = "app.log", format = text }
  map { payload = {"line": payload} }
  map {
    payload.parsed.level = split(payload.line, " ")[0]
    payload.tmp          = 1
    meta["source"]       = "app.log"
  }
  map {
    del payload.tmp
    payload.parsed.source = meta["source"]
  }
  id payload.line
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS lines (id TEXT PRIMARY KEY, body TEXT)"
    insert_query = "INSERT INTO lines (id, body) VALUES (${meta[\"mqb.id\"]}, ${toJSON(payload)}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// TestRunMapOverTextLines builds and runs the route end to end: all 72
// lines land, wrapped, none in a DLQ, the verdict is effectively-once, a
// second run over the same file adds nothing, and mqbc fmt leaves the
// file as written.
func TestRunMapOverTextLines(t *testing.T) {
	dir := t.TempDir()
	var in strings.Builder
	for i := 1; i <= 72; i++ {
		fmt.Fprintf(&in, "INFO request %d done\n", i)
	}
	write(t, dir, "app.log", in.String())
	write(t, dir, "r.mqb", mapTextRoute)

	if out, errOut, code := mqbc(t, dir, "fmt", "--check", "r.mqb"); code != 0 {
		t.Fatalf("fmt --check exit %d:\n%s%s", code, out, errOut)
	}
	for run := 1; run <= 2; run++ {
		r := runIn(t, dir, "run", "r.mqb")
		if r.code != exitOK {
			t.Fatalf("run %d exit %d\nstdout:\n%s\nstderr:\n%s", run, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout+r.stderr, "lines: effectively-once") {
			t.Errorf("run %d does not report the route effectively-once:\n%s%s", run, r.stdout, r.stderr)
		}
		if got := sqliteQueryInt(t, filepath.Join(dir, "out.db"), "SELECT count(*) FROM lines"); got != 72 {
			t.Errorf("after run %d the table has %d rows, want 72", run, got)
		}
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "out.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var body string
	if err := db.QueryRow(`SELECT body FROM lines WHERE id = 'INFO request 7 done'`).Scan(&body); err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(body)); err != nil {
		t.Fatal(err)
	}
	if want := `{"line":"INFO request 7 done","parsed":{"level":"INFO","source":"app.log"}}`; compact.String() != want {
		t.Errorf("row body %s, want %s", compact.String(), want)
	}
}
