package runtime

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
)

// idAmountLines are the JSON lines {"id":"<prefix>NNN","amount":N} for N
// from from to to.
func idAmountLines(prefix string, from, to int) []string {
	var lines []string
	for i := from; i <= to; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"%s%03d","amount":%d}`, prefix, i, i))
	}
	return lines
}

// sqlQuery runs query on a fresh database/sql connection and hands its
// rows to scan.
func sqlQuery[T any](t *testing.T, driver, dsn, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	db, err := sql.Open(driver, dsn)
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

// sqliteMap reads the (key, value) rows query returns from the SQLite
// database at dbPath, opened read-only.
func sqliteMap[V any](t *testing.T, dbPath, query string) map[string]V {
	t.Helper()
	return sqlQuery(t, sqliteDriver, "file:"+dbPath+"?mode=ro", query, scanPairs[V])
}

// scanPairs reads rows of (key, value) into a map, failing on a key seen
// twice.
func scanPairs[V any](t *testing.T, rows sqlRows) map[string]V {
	t.Helper()
	out := map[string]V{}
	for rows.Next() {
		var k string
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[k]; dup {
			t.Errorf("id %s stored twice", k)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lockOutcomeTable creates table (id TEXT PRIMARY KEY, outcome TEXT NOT
// NULL) in the SQLite database at dbPath and holds its write lock for
// longer than a sink's 5 s busy timeout: the sink's first write fails with
// SQLITE_BUSY, and the route's retry has to write the batch again.
func lockOutcomeTable(t *testing.T, dbPath, table string) {
	t.Helper()
	if testing.Short() {
		t.Skip("holds a SQLite lock past the 5 s busy timeout")
	}
	lock, err := sql.Open(sqliteDriver, "file:"+dbPath+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	lock.SetMaxOpenConns(1)
	if _, err := lock.Exec("CREATE TABLE " + table + " (id TEXT PRIMARY KEY, outcome TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	tx, err := lock.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO " + table + " VALUES ('lock', 'held')"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(5500 * time.Millisecond)
		tx.Rollback()
	}()
}

// runInsertedExisted is the spec's insert-vs-duplicate branch, run twice
// in dir: first o001..o040, then o031..o050 with o045 repeated and bad, a
// record the call fails. compile gives the route upsert_branch reading the
// named input file; the route's switch writes the inserted records to
// new.jsonl, the existing ones to existed.jsonl and the rest to
// unrouted.jsonl. It checks both runs' stats and the inserted and existed
// files; the caller checks unrouted.jsonl and the store.
func runInsertedExisted(t *testing.T, dir string, compile func(input string) plan.Plan, bad string) {
	t.Helper()
	writeLines(t, filepath.Join(dir, "first.jsonl"), idAmountLines("o", 1, 40)...)
	st := runIn(t, dir, compile("first.jsonl")).Route("upsert_branch")
	if st.In != 40 || st.Out != 40 {
		t.Errorf("first run %+v, want in 40 out 40", st)
	}
	sameIDs(t, "first run: inserted", fileIDs(t, filepath.Join(dir, "new.jsonl")), seqIDs("o", 1, 40))
	sameIDs(t, "first run: existed", fileIDs(t, filepath.Join(dir, "existed.jsonl")), nil)

	second := append(idAmountLines("o", 31, 50), `{"id":"o045","amount":45}`, bad)
	writeLines(t, filepath.Join(dir, "second.jsonl"), second...)
	st = runIn(t, dir, compile("second.jsonl")).Route("upsert_branch")
	if st.In != 22 || st.Out != 22 || st.DeadLettered+st.Errors != 0 {
		t.Errorf("second run %+v, want in 22 out 22", st)
	}
	sameIDs(t, "inserted", fileIDs(t, filepath.Join(dir, "new.jsonl")), seqIDs("o", 1, 50))
	sameIDs(t, "existed", fileIDs(t, filepath.Join(dir, "existed.jsonl")), append(seqIDs("o", 31, 40), "o045"))
}

// tableExists reports whether the SQLite database at dbPath has table
// (false while the file or the table is not there yet).
func tableExists(dbPath, table string) bool {
	if _, err := os.Stat(dbPath); err != nil {
		return false
	}
	db, err := sql.Open(sqliteDriver, "file:"+dbPath+"?mode=ro")
	if err != nil {
		return false
	}
	defer db.Close()
	var n int
	return db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&n) == nil && n == 1
}
