package runtime

import (
	"database/sql"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

var idAmountLines = plantest.IDAmountLines

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
func scanPairs[V any](t *testing.T, rows sqlRows) map[string]V { return plantest.ScanPairs[V](t, rows) }

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

// runInsertedExisted is plantest.InsertedExisted run with runIn.
func runInsertedExisted(t *testing.T, dir string, compile func(input string) plan.Plan, bad string) {
	t.Helper()
	plantest.InsertedExisted(t, dir, compile, bad, func(dir string, p plan.Plan) plantest.Counts {
		st := runIn(t, dir, p).Route("upsert_branch")
		return plantest.Counts{In: st.In, Out: st.Out, Failed: st.DeadLettered + st.Errors}
	})
}
