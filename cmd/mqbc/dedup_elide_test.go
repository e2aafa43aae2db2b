package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// elideRoute is file → id → dedup → dlq → sql. keep is the dedup's
// keep attribute ("true" or "false"); sink is the sql block's body.
const elideRoute = `route r {
  from file { path = "in.jsonl" }
  id payload.id
  dedup {
    key   = meta["mqb.id"]
    store = "pebble://state/dedup"
    keep  = %s
  }
  dlq {
    to file { path = "dlq.jsonl" }
  }
  to sql {
%s
  }
}
`

// TestDedupElision: a dedup whose key the sink's conflict clause already
// absorbs (first row kept) is left out of the plan, and the run lands what
// the same route with the dedup kept lands: the same rows (the first body
// of every id), the same dead letters, the same counts — repeats counted
// as deduplicated either way.
func TestDedupElision(t *testing.T) {
	pg := testsrv.Postgres(t)
	my := testsrv.MariaDBDatabase(t)
	for _, tc := range []struct {
		name   string
		elides bool // OR IGNORE and INSERT IGNORE swallow more than repeats: no
		sink   func(table string) string
		rows   func(t *testing.T, dir, table string) map[string]string
	}{
		{"sqlite on conflict", true, func(table string) string {
			return `    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS ` + table + ` (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
    insert_query = "INSERT INTO ` + table + ` (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body}) ON CONFLICT (id) DO NOTHING"`
		}, func(t *testing.T, dir, table string) map[string]string {
			return runtest.SQLiteMap[string](t, filepath.Join(dir, "out.db"), "SELECT id, body FROM "+table)
		}},
		{"sqlite or ignore", false, func(table string) string {
			return `    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS ` + table + ` (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
    insert_query = "INSERT OR IGNORE INTO ` + table + ` (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body})"`
		}, func(t *testing.T, dir, table string) map[string]string {
			return runtest.SQLiteMap[string](t, filepath.Join(dir, "out.db"), "SELECT id, body FROM "+table)
		}},
		{"postgres", true, func(table string) string {
			return fmt.Sprintf(`    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY, body TEXT NOT NULL)"
    insert_query = "INSERT INTO %s (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body}) ON CONFLICT (id) DO NOTHING"`, pg, table, table)
		}, func(t *testing.T, _, table string) map[string]string {
			return pgStrings(t, pg, "SELECT id, body FROM "+table)
		}},
		{"mariadb insert ignore", false, func(table string) string {
			return fmt.Sprintf(`    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS %s (id VARCHAR(32) PRIMARY KEY, body TEXT NOT NULL)"
    insert_query = "INSERT IGNORE INTO %s (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body})"`, my.URL, table, table)
		}, func(t *testing.T, _, table string) map[string]string {
			return myStrings(t, my.DSN, "SELECT id, body FROM "+table)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type result struct {
				summary string
				rows    map[string]string
				dlq     int
			}
			var got [2]result
			for i, keep := range []string{"false", "true"} {
				dir := t.TempDir()
				table := "t_" + strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "_"), "-", "_") + "_" + keep
				write(t, dir, "r.mqb", fmt.Sprintf(elideRoute, keep, tc.sink(table)))
				writeRepeats(t, filepath.Join(dir, "in.jsonl"))
				out, errOut, code := mqbc(t, dir, "build", "r.mqb")
				elided := strings.Contains(out, "dedup elided")
				if code != 0 || elided != (tc.elides && keep == "false") {
					t.Fatalf("keep = %s: build exit %d, elided %v\n%s%s", keep, code, elided, out, errOut)
				}
				out, errOut, code = mqbc(t, dir, "run", "r.mqb")
				m := regexp.MustCompile(`r: in \d+, out \d+, deduplicated \d+, filtered \d+, dead-lettered \d+, errors \d+`).FindString(out)
				if code != 0 || m == "" {
					t.Fatalf("keep = %s: run exit %d\n%s%s", keep, code, out, errOut)
				}
				got[i] = result{m, tc.rows(t, dir, table), countLines(t, filepath.Join(dir, "dlq.jsonl"))}
			}
			if !strings.Contains(got[1].summary, "deduplicated 50,") {
				t.Errorf("with the dedup: %s, want 50 deduplicated", got[1].summary)
			}
			if got[0].summary != got[1].summary || got[0].dlq != got[1].dlq {
				t.Errorf("elided: %s, %d dead letters; kept: %s, %d", got[0].summary, got[0].dlq, got[1].summary, got[1].dlq)
			}
			if fmt.Sprint(got[0].rows) != fmt.Sprint(got[1].rows) {
				t.Errorf("the tables differ:\nelided %v\nkept   %v", got[0].rows, got[1].rows)
			}
			if tc.elides && !strings.Contains(got[0].summary, "dead-lettered 3,") {
				t.Errorf("%s: want the 3 null bodies dead-lettered", got[0].summary)
			}
			for id, body := range got[0].rows {
				if !strings.HasPrefix(body, "first ") && !strings.HasPrefix(id, "bad-") {
					t.Fatalf("id %s kept %q: a repeat won over the first record", id, body)
				}
			}
		})
	}
}

// writeRepeats writes 150 ids, 50 of them again later with another body,
// and 3 records whose body is null (refused by NOT NULL, except where the
// database turns it into a default).
func writeRepeats(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	for i := range 150 {
		fmt.Fprintf(&b, `{"id": "o-%03d", "body": "first %d"}`+"\n", i, i)
		if i%3 == 2 {
			fmt.Fprintf(&b, `{"id": "o-%03d", "body": "repeat %d"}`+"\n", i-1, i)
		}
	}
	for i := range 3 {
		fmt.Fprintf(&b, `{"id": "bad-%d", "body": null}`+"\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for s := bufio.NewScanner(f); s.Scan(); {
		n++
	}
	return n
}

func pgStrings(t *testing.T, url, query string) map[string]string {
	t.Helper()
	return plantest.PGQuery(t, url, query, func(t *testing.T, rows plantest.Rows) map[string]string {
		return plantest.ScanPairs[string](t, rows)
	})
}

func myStrings(t *testing.T, dsn, query string) map[string]string {
	t.Helper()
	return plantest.SQLQuery(t, "mysql", dsn, query, func(t *testing.T, rows plantest.Rows) map[string]string {
		return plantest.ScanPairs[string](t, rows)
	})
}
