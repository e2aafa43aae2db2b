package runtime

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
)

var idAmountLines = plantest.IDAmountLines

// sqlQuery runs query on a fresh database/sql connection and hands its
// rows to scan.
func sqlQuery[T any](t *testing.T, driver, dsn, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	return plantest.SQLQuery(t, driver, dsn, query, scan)
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

var lockOutcomeTable = plantest.LockOutcomeTable
