package runtime_test

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
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
	return sqlQuery(t, plantest.SQLiteDriver, "file:"+dbPath+"?mode=ro", query, scanPairs[V])
}

// scanPairs reads rows of (key, value) into a map, failing on a key seen
// twice.
func scanPairs[V any](t *testing.T, rows sqlRows) map[string]V { return plantest.ScanPairs[V](t, rows) }

var lockOutcomeTable = plantest.LockOutcomeTable

// The sql connector's tests hold these too (connector/sql).

// pgOrdersDDL is the orders table on PostgreSQL.
const pgOrdersDDL = `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, body TEXT)`

// sqlServerPlan is file → id → (dedup) → dlq → sql on a server url
// (plantest.SQLServerPlan) over e's paths.
func sqlServerPlan(e testEnv, url, ddl, conflict string, batch, concurrency int, withDedup bool) plan.Plan {
	return plantest.SQLServerPlan(e.input, e.state, e.dedup, e.dlq, url, ddl, conflict, batch, concurrency, withDedup)
}

// sqlRows is what database/sql's and pgx's rows have in common.
type sqlRows = plantest.Rows

// scanOrderRows reads rows of (id, amount) into a map, failing on a repeat.
func scanOrderRows(t *testing.T, rows sqlRows) map[string]int {
	t.Helper()
	return scanPairs[int](t, rows)
}

// pgQuery runs a query on a fresh connection and hands its rows to scan.
func pgQuery[T any](t *testing.T, url, query string, scan func(*testing.T, sqlRows) T) T {
	t.Helper()
	return plantest.PGQuery(t, url, query, scan)
}

var withPremise = plantest.WithPremise
