//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The bad input corpus (testdata/bad, run into SQLite by
// cmd/mqbc/run_badinput_test.go) into the Postgres and MariaDB sinks: a bad
// row fails alone and reaches the DLQ with the database's reason, the run
// goes on and succeeds, counts add up, good rows and SQL-looking payloads
// are stored verbatim (bound, never spliced), and the table is still there.
// Types the database coerces differently (MariaDB rounds 1.5 into an
// INTEGER) may land: they are logged, not judged.
func TestSQLServerBadInput(t *testing.T) {
	files, err := filepath.Glob("../testdata/bad/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	var input strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		input.Write(data)
	}
	// Valid JSON that a text column may refuse: an escaped NUL (Postgres
	// text cannot hold one) and a lone surrogate (refused by the decoder,
	// which has no UTF-8 for it: dead-lettered).
	input.WriteString(`{"order_id":"esc-nul","qty":1,"body":"a\u0000b"}` + "\n")
	input.WriteString(`{"order_id":"esc-surrogate","qty":1,"body":"a\ud800b"}` + "\n")
	lines := 0
	for _, l := range strings.Split(input.String(), "\n") {
		if strings.TrimSpace(l) != "" {
			lines++
		}
	}
	mustHold := map[string]string{
		"s-2":                       "'); DROP TABLE orders; --",
		"'); DROP TABLE orders; --": "id is an injection",
		"s-3":                       `"; DELETE FROM orders WHERE 1=1; --`,
		"s-4":                       "1' OR '1'='1",
		"s-5":                       "?; ATTACH DATABASE '/tmp/x.db' AS x; --",
		"s-6":                       "${payload.order_id} $1 :id @id",
	}
	for _, id := range []string{"u-1", "u-2", "n-1", "n-2", "d-1", "d-2", "w-1", "w-2", "m-1", "m-2", "s-1"} {
		mustHold[id] = "ok " + id
	}

	// read returns the table's rows, id → body.
	type sqlCase struct {
		name, url, conflict string
		read                func(t *testing.T) map[string]string
	}
	pg := testsrv.Postgres(t)
	my := testsrv.MariaDBDatabase(t)
	cases := []sqlCase{
		{"postgres", pg, "ON CONFLICT (id) DO NOTHING", func(t *testing.T) map[string]string {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, pg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			rows, err := conn.Query(ctx, `SELECT id, body FROM orders`)
			if err != nil {
				t.Fatalf("read the table (is it still there?): %v", err)
			}
			defer rows.Close()
			return scanBodies(t, rows)
		}},
		{"mariadb", my.URL, "ON DUPLICATE KEY UPDATE body = VALUES(body)", func(t *testing.T) map[string]string {
			h, err := sql.Open("mysql", my.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			rows, err := h.Query(`SELECT id, body FROM orders`)
			if err != nil {
				t.Fatalf("read the table (is it still there?): %v", err)
			}
			defer rows.Close()
			return scanBodies(t, rows)
		}},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "in.jsonl"), input.String())
			idType := "TEXT"
			if tc.name == "mariadb" {
				idType = "VARCHAR(200)"
			}
			src := fmt.Sprintf(`route chaos {
  from file { path = "in.jsonl", max_record_bytes = 1048576 }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS orders (id %s PRIMARY KEY, qty INTEGER NOT NULL CHECK (qty >= 0), body TEXT NOT NULL)"
    insert_query = """INSERT INTO orders (id, qty, body) VALUES (${meta["mqb.id"]}, ${payload.qty}, ${payload.body}) %s"""
  }
}
`, tc.url, idType, tc.conflict)
			writeFile(t, filepath.Join(dir, "chaos.mqb"), src)
			r := startMqbc(t, dir, nil)
			if err := r.waitExit(t, 2*time.Minute, "the run did not end in 2 minutes"); err != nil {
				t.Fatalf("a bad record failed the run instead of the record: %v\n%s%s", err, r.stdout.String(), tail(r.stderrText(), 3000))
			}
			m := statsRE.FindStringSubmatch(r.stdout.String())
			if m == nil {
				t.Fatalf("no stats line:\n%s", r.stdout.String())
			}
			var n [7]int64
			for i := 1; i < 7; i++ {
				n[i], _ = strconv.ParseInt(m[i], 10, 64)
			}
			t.Logf("%s", m[0])
			if n[1] != int64(lines) || n[1] != n[2]+n[3]+n[4]+n[5]+n[6] || n[6] != 0 {
				t.Errorf("want in = %d lines = out + deduplicated + filtered + dead-lettered, no errors: %s", lines, m[0])
			}

			f, err := os.Open(filepath.Join(dir, "dlq.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			dlq := map[string]string{}
			entries := int64(0)
			for sc.Scan() {
				var e struct {
					Error string            `json:"error"`
					Meta  map[string]string `json:"meta"`
				}
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("DLQ line: %v", err)
				}
				entries++
				if e.Error == "" {
					t.Errorf("DLQ entry without a reason: %.300s", sc.Text())
				}
				if id := e.Meta["mqb.id"]; id != "" {
					dlq[id] = e.Error
				}
			}
			if entries != n[5] {
				t.Errorf("DLQ holds %d records, the run dead-lettered %d", entries, n[5])
			}

			got := tc.read(t)
			for id, body := range mustHold {
				if got[id] != body {
					t.Errorf("row %q = %q, want %q verbatim (DLQ reason: %q)", id, got[id], body, dlq[id])
				}
			}
			for id, body := range got {
				if _, ok := mustHold[id]; !ok {
					t.Logf("also stored: %q = %q", id, body)
				}
			}
			for id, reason := range dlq {
				t.Logf("dead-lettered %q: %s", id, reason)
			}
		})
	}
}

// scanBodies returns rows of (id, body) as id → body.
func scanBodies(t *testing.T, rows queryRows) map[string]string {
	t.Helper()
	got := map[string]string{}
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		got[id] = body
	}
	return got
}
