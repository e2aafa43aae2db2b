package sql

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestPremiseRepeatInsertable: a handler's plain INSERT into (k) keeps
// the route at-least-once only if its repeat cannot fail on a unique key
// (a failed replay dead-letters the record before the sink). create_table
// shows UNIQUE (k, v) with v nullable and no default, so the compiler
// says it cannot, but CREATE TABLE IF NOT EXISTS keeps a table already
// there: the plan carries the premise on the handler's node, and the
// runtime reads the live table and refuses the route, before any record,
// when a unique key (or what the check cannot follow) breaks it.
func TestPremiseRepeatInsertable(t *testing.T) {
	type backend struct {
		name string
		open func(t *testing.T, dir string) (url string, exec func(string))
	}
	backends := []backend{
		{name: "sqlite", open: func(t *testing.T, dir string) (string, func(string)) {
			db := filepath.Join(dir, "h.db")
			return "sqlite://" + db, func(ddl string) { execSQL(t, sqliteDriver, db, ddl) }
		}},
		{name: "postgres", open: func(t *testing.T, _ string) (string, func(string)) {
			url := testsrv.Postgres(t)
			return url, func(ddl string) {
				if err := pgExec(url, ddl); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "mariadb", open: func(t *testing.T, _ string) (string, func(string)) {
			d := testsrv.MariaDBDatabase(t)
			return d.URL, func(ddl string) { execSQL(t, "mysql", d.DSN, ddl) }
		}},
	}
	all := func(ddl string) map[string]string {
		return map[string]string{"sqlite": ddl, "postgres": ddl, "mariadb": ddl}
	}
	cases := []struct {
		name  string
		ddl   map[string]string // the table as it already is, by backend (none: skip the backend)
		ok    bool
		found string // what the refusal names
	}{
		{"as create_table says", all("CREATE TABLE log (k VARCHAR(40), v VARCHAR(40), UNIQUE (k, v))"), true, ""},
		{"no unique key", all("CREATE TABLE log (k VARCHAR(40), v VARCHAR(40))"), true, ""},
		{"default null", all("CREATE TABLE log (k VARCHAR(40), v VARCHAR(40) DEFAULT NULL, UNIQUE (k, v))"), true, ""},
		{"literal default", all("CREATE TABLE log (k VARCHAR(40), v VARCHAR(40) DEFAULT 'x', UNIQUE (k, v))"), false, "DEFAULT"},
		{"not null", all("CREATE TABLE log (k VARCHAR(40), v VARCHAR(40) NOT NULL DEFAULT '', UNIQUE (k, v))"), false, "v (left out"},
		{"key on the inserted column", all("CREATE TABLE log (k VARCHAR(40), v VARCHAR(40), UNIQUE (k))"), false, "k (inserted)"},
		{"computed default", all("CREATE TABLE log (k VARCHAR(40), v TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP, UNIQUE (k, v))"), false, "DEFAULT"},
		{"auto-increment", map[string]string{
			"sqlite":   "CREATE TABLE log (n INTEGER PRIMARY KEY AUTOINCREMENT, k VARCHAR(40), UNIQUE (k, n))",
			"postgres": "CREATE TABLE log (n bigserial PRIMARY KEY, k VARCHAR(40), UNIQUE (k, n))",
			"mariadb":  "CREATE TABLE log (n BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(40), UNIQUE (k, n))",
		}, true, ""},
		{"rowid alias, identity", map[string]string{
			"sqlite":   "CREATE TABLE log (n INTEGER PRIMARY KEY, k VARCHAR(40), UNIQUE (k, n))",
			"postgres": "CREATE TABLE log (n bigint GENERATED ALWAYS AS IDENTITY, k VARCHAR(40), UNIQUE (k, n))",
		}, true, ""},
		{"integer key not the rowid", map[string]string{
			"sqlite": "CREATE TABLE log (n INTEGER PRIMARY KEY, k VARCHAR(40), UNIQUE (k, n)) WITHOUT ROWID",
		}, false, "PRIMARY KEY"},
		{"generated column", map[string]string{
			"sqlite":   "CREATE TABLE log (k VARCHAR(40), v VARCHAR(41) GENERATED ALWAYS AS (k || 'x') STORED, UNIQUE (k, v))",
			"postgres": "CREATE TABLE log (k VARCHAR(40), v VARCHAR(41) GENERATED ALWAYS AS (k || 'x') STORED, UNIQUE (k, v))",
			"mariadb":  "CREATE TABLE log (k VARCHAR(40), v VARCHAR(41) AS (CONCAT(k, 'x')) PERSISTENT, UNIQUE (k, v))",
		}, false, "generated"},
		{"expression index", map[string]string{
			"sqlite":   "CREATE TABLE log (k VARCHAR(40), v VARCHAR(40)); CREATE UNIQUE INDEX log_k ON log (lower(k), v)",
			"postgres": "CREATE TABLE log (k VARCHAR(40), v VARCHAR(40)); CREATE UNIQUE INDEX log_k ON log (lower(k), v)",
		}, false, "expression"},
		{"partial index", map[string]string{
			"sqlite":   "CREATE TABLE log (k VARCHAR(40), v VARCHAR(40)); CREATE UNIQUE INDEX log_k ON log (k, v) WHERE k <> ''",
			"postgres": "CREATE TABLE log (k VARCHAR(40), v VARCHAR(40)); CREATE UNIQUE INDEX log_k ON log (k, v) WHERE k <> ''",
		}, false, "partial"},
		{"nulls not distinct", map[string]string{
			"postgres": "CREATE TABLE log (k VARCHAR(40), v VARCHAR(40), UNIQUE NULLS NOT DISTINCT (k, v))",
		}, false, "NULLS NOT DISTINCT"},
		{"exclusion constraint", map[string]string{
			"postgres": "CREATE TABLE log (k VARCHAR(40), v VARCHAR(40), EXCLUDE USING btree (k WITH =))",
		}, false, "exclusion"},
		{"domain with a default", map[string]string{
			"postgres": "CREATE DOMAIN tag AS VARCHAR(40) DEFAULT 'x'; CREATE TABLE log (k VARCHAR(40), v tag, UNIQUE (k, v))",
		}, false, "domain"},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				ddl := c.ddl[be.name]
				if ddl == "" {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					url, exec := be.open(t, dir)
					exec(ddl)
					writeLines(t, filepath.Join(dir, "in.jsonl"), `{"k": "a"}`, `{"k": "b"}`)
					p := compileMQB(t, fmt.Sprintf(`
route r {
  from file { path = "in.jsonl" }
  handle sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS log (k VARCHAR(40), v VARCHAR(40), UNIQUE (k, v))"
    insert_query = "INSERT INTO log (k) VALUES (${payload.k})"
  }
  to file { path = "out.jsonl" }
}`, url))
					r := p.Routes[0]
					if r.Guarantee != plan.AtLeastOnce {
						t.Fatalf("verdict %s, want at-least-once given the premise: %v", r.Guarantee, r.Reasons)
					}
					var premise *plan.Premise
					for i, pr := range r.Premises {
						if pr.Kind == plan.PremiseRepeatInsertable {
							premise = &r.Premises[i]
						}
					}
					if premise == nil || strings.Join(premise.Columns, ",") != "k" || premise.When != plan.CheckStartup || premise.Target != "log" {
						t.Fatalf("premise %+v, want repeat_insertable on log (k), checked at start-up", premise)
					}
					if n := findHandler(r.Nodes); n == nil || n.ID != premise.Node {
						t.Fatalf("premise on node %s, want the handler's node %+v", premise.Node, n)
					}
					opts := testOptions(t)
					opts.BaseDir = dir
					opts.StateDir = filepath.Join(dir, "state")
					res := checkOneKind(t, p, opts, plan.PremiseRepeatInsertable, c.ok)
					if !c.ok && !strings.Contains(res.Err.Error(), c.found) {
						t.Errorf("the refusal does not say %q: %v", c.found, res.Err)
					}
					if !c.ok && testing.Verbose() {
						t.Log(res.Err)
					}
					st, err := runtime.Run(context.Background(), p, opts)
					if c.ok {
						if err != nil || st.Route("r").Out != 2 {
							t.Fatalf("run: %+v, %v", st, err)
						}
						return
					}
					if err == nil || !strings.Contains(err.Error(), "premise not met") || strings.Contains(err.Error(), "plan the route at-least-once") || st.Route("r").In != 0 {
						t.Fatalf("run with a broken premise: %+v, %v", st, err)
					}
				})
			}
		})
	}
}

func findHandler(ns []plan.Node) *plan.Node {
	for i := range ns {
		if ns[i].Role == plan.RoleHandler {
			return &ns[i]
		}
	}
	return nil
}
