package plantest

import (
	"database/sql"
	"os"
	"testing"
	"time"
)

// SQLiteDriver is the name of the SQLite driver the runtime's sql sink
// registers: the SQLite readers work in a test binary that links the
// runtime.
const SQLiteDriver = "sqlite3"

// SQLiteIDs returns the sorted ids of table (id TEXT PRIMARY KEY) in the
// SQLite database at dbPath, opened read-only.
func SQLiteIDs(t testing.TB, dbPath, table string) []string {
	t.Helper()
	db, err := sql.Open(SQLiteDriver, "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id FROM " + table + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TableExists reports whether the SQLite database at dbPath has table
// (false while the file or the table is not there yet).
func TableExists(dbPath, table string) bool {
	if _, err := os.Stat(dbPath); err != nil {
		return false
	}
	db, err := sql.Open(SQLiteDriver, "file:"+dbPath+"?mode=ro")
	if err != nil {
		return false
	}
	defer db.Close()
	var n int
	return db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&n) == nil && n == 1
}

// SQLiteExec runs stmts, in order, on the SQLite database at dbPath
// (created when it does not exist).
func SQLiteExec(t testing.TB, dbPath string, stmts ...string) {
	t.Helper()
	db, err := sql.Open(SQLiteDriver, "file:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// LockOutcomeTable creates table (id TEXT PRIMARY KEY, outcome TEXT NOT
// NULL) in the SQLite database at dbPath and holds its write lock for
// longer than a sink's 5 s busy timeout: the sink's first write fails with
// SQLITE_BUSY, and the route's retry has to write the batch again. It
// skips the test under -short.
func LockOutcomeTable(t *testing.T, dbPath, table string) {
	t.Helper()
	if testing.Short() {
		t.Skip("holds a SQLite lock past the 5 s busy timeout")
	}
	lock, err := sql.Open(SQLiteDriver, "file:"+dbPath+"?_journal_mode=WAL")
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
