package sql

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// TestPremiseReplaceStableColumns: a REPLACE into a table the file does
// not create (or creates IF NOT EXISTS) is effectively-once only with the
// premise that every column it leaves out comes back the same on a
// replay. The compiler puts the premise in the plan; the runtime checks it
// against the live table and refuses the route, naming the table, the
// column, what it found and the fix, when a left-out column has a DEFAULT
// that is not a literal or is filled by the database.
func TestPremiseReplaceStableColumns(t *testing.T) {
	type tc struct {
		name string
		ddl  map[string]string // backend → the table as it exists before the run
		cols string            // the columns the REPLACE writes
		// createTable is a create_table in the file (IF NOT EXISTS), which
		// the existing table may not match.
		createTable string
		ok          bool
		found       []string // what the refusal names
	}
	cases := []tc{
		{name: "current_timestamp left out", ddl: map[string]string{
			"sqlite":  "CREATE TABLE orders (id TEXT PRIMARY KEY, body TEXT, created_at TEXT DEFAULT CURRENT_TIMESTAMP)",
			"mariadb": "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
		}, cols: "id, body", found: []string{"created_at", "current_timestamp", "not a literal"}},
		{name: "literal default", ddl: map[string]string{
			"sqlite":  "CREATE TABLE orders (id TEXT PRIMARY KEY, body TEXT, created_at TEXT DEFAULT 'never', qty INT DEFAULT -1, note TEXT DEFAULT NULL, tag TEXT DEFAULT ('x'))",
			"mariadb": "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, created_at VARCHAR(20) DEFAULT 'never', qty INT DEFAULT -1, note TEXT DEFAULT NULL, tag VARCHAR(5))",
		}, cols: "id, body", ok: true},
		{name: "volatile column written", ddl: map[string]string{
			"sqlite":  "CREATE TABLE orders (id TEXT PRIMARY KEY, body TEXT, created_at TEXT DEFAULT CURRENT_TIMESTAMP)",
			"mariadb": "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, created_at VARCHAR(40) DEFAULT (CURRENT_TIMESTAMP))",
		}, cols: "id, body, created_at", ok: true},
		{name: "function default left out", ddl: map[string]string{
			"sqlite":  "CREATE TABLE orders (id TEXT PRIMARY KEY, body TEXT, seen TEXT DEFAULT (datetime('now')))",
			"mariadb": "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, seen CHAR(36) DEFAULT (UUID()))",
		}, cols: "id, body", found: []string{"seen", "not a literal"}},
		{name: "auto-increment left out", ddl: map[string]string{
			"sqlite":  "CREATE TABLE orders (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE, body TEXT)",
			"mariadb": "CREATE TABLE orders (n INT AUTO_INCREMENT PRIMARY KEY, id VARCHAR(40) UNIQUE, body TEXT)",
		}, cols: "id, body", found: []string{"column n", "AUTO"}},
		{name: "rowid alias left out", ddl: map[string]string{
			"sqlite": "CREATE TABLE orders (n INTEGER PRIMARY KEY, id TEXT UNIQUE, body TEXT)",
		}, cols: "id, body", found: []string{"column n", "rowid"}},
		{name: "on update left out", ddl: map[string]string{
			"mariadb": "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, touched TIMESTAMP NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP)",
		}, cols: "id, body", found: []string{"touched", "ON UPDATE"}},
		{name: "create_table if not exists does not describe the table", ddl: map[string]string{
			"sqlite":  "CREATE TABLE orders (id TEXT PRIMARY KEY, body TEXT, created_at TEXT DEFAULT CURRENT_TIMESTAMP)",
			"mariadb": "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
		}, cols: "id, body", createTable: "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(40) PRIMARY KEY, body TEXT, created_at VARCHAR(20) DEFAULT 'never')",
			found: []string{"created_at", "current_timestamp"}},
	}
	type backend struct {
		name   string
		open   func(t *testing.T, dir string) (url, driver, dsn string)
		clause string
	}
	backends := []backend{
		{name: "sqlite", clause: "INSERT OR REPLACE", open: func(t *testing.T, dir string) (string, string, string) {
			db := filepath.Join(dir, "out.db")
			return "sqlite://" + db, sqliteDriver, db
		}},
		{name: "mariadb", clause: "REPLACE", open: func(t *testing.T, _ string) (string, string, string) {
			d := testsrv.MariaDBDatabase(t)
			return d.URL, "mysql", d.DSN
		}},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				ddl, ok := c.ddl[be.name]
				if !ok {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					url, driver, dsn := be.open(t, dir)
					execSQL(t, driver, dsn, ddl)
					writeLines(t, filepath.Join(dir, "in.jsonl"), `{"id": "1", "body": "a", "ts": "t1"}`, `{"id": "2", "body": "b", "ts": "t2"}`)
					var vals []string
					for _, col := range strings.Split(c.cols, ", ") {
						vals = append(vals, map[string]string{"id": "${payload.id}", "body": "${payload.body}", "created_at": "${payload.ts}"}[col])
					}
					create := ""
					if c.createTable != "" {
						create = fmt.Sprintf("create_table = %q\n", c.createTable)
					}
					src := fmt.Sprintf(`
route r {
  from file { path = "in.jsonl" }
  to sql {
    url = %q
    %sinsert_query = %q
  }
}`, url, create, fmt.Sprintf("%s INTO orders (%s) VALUES (%s)", be.clause, c.cols, strings.Join(vals, ", ")))
					p := compileMQB(t, src)
					if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
						t.Fatalf("verdict %s, want effectively-once given the premise: %v", g, p.Routes[0].Reasons)
					}
					var premise *plan.Premise
					for i, pr := range p.Routes[0].Premises {
						if pr.Kind == plan.PremiseReplaceStableColumns {
							premise = &p.Routes[0].Premises[i]
						}
					}
					if premise == nil {
						t.Fatalf("the plan has no %s premise: %+v", plan.PremiseReplaceStableColumns, p.Routes[0].Premises)
					}
					if got := strings.Join(premise.Columns, ", "); got != c.cols || premise.When != plan.CheckStartup || premise.Target != "orders" {
						t.Fatalf("premise %+v, want columns (%s) of orders at start-up", premise, c.cols)
					}
					opts := testOptions(t)
					opts.BaseDir = dir
					opts.StateDir = filepath.Join(dir, "state")
					res := checkOneKind(t, p, opts, plan.PremiseReplaceStableColumns, c.ok)
					t.Log(res)
					if !c.ok {
						msg := res.Err.Error()
						for _, want := range append([]string{"table orders", "REPLACE leaves out", "ON CONFLICT DO NOTHING", "write: " + map[string]string{"sqlite": "INSERT OR REPLACE", "mariadb": "REPLACE INTO"}[be.name]}, c.found...) {
							if !strings.Contains(strings.ToLower(msg), strings.ToLower(want)) {
								t.Errorf("error %q does not say %q", msg, want)
							}
						}
					}
					runPremiseRoute(t, p, opts, c.ok, "premise not met")
				})
			}
		})
	}
}

// checkOneKind runs the start-up checks of p and returns the result of
// the premise of kind, failing t when another premise fails or that one's
// outcome is not ok.
func checkOneKind(t *testing.T, p plan.Plan, opts runtime.Options, kind string, ok bool) *runtime.PremiseResult {
	t.Helper()
	var res *runtime.PremiseResult
	for _, r := range runtime.Check(context.Background(), p, opts) {
		if r.Premise.Kind == kind {
			res = &r
		} else if !r.OK {
			t.Fatalf("another premise failed: %v", r)
		}
	}
	if res == nil || res.OK != ok {
		t.Fatalf("check = %v, want ok %v", res, ok)
	}
	return res
}

// execSQL runs ddl (statements separated by ;) on a fresh connection.
func execSQL(t *testing.T, driver, dsn, ddl string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range strings.Split(ddl, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}
