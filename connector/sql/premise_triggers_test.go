package sql

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// TestPremiseNoTriggers: an effectively-once write into a table rests on
// the premise that nothing else runs on that write. A trigger's effect is
// outside what the proof covers (a BEFORE INSERT trigger fires on a
// replay's conflicting row too), so a route into a table that has one is
// refused before any record, naming the trigger and the statement that
// drops it; PostgreSQL's internal foreign-key triggers, disabled triggers
// and triggers of other tables are allowed.
func TestPremiseNoTriggers(t *testing.T) {
	const table = "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(40) PRIMARY KEY, v INT)"
	type backend struct {
		name string
		open func(t *testing.T, dir string) (url string, exec func(...string))
	}
	backends := []backend{
		{name: "sqlite", open: func(t *testing.T, dir string) (string, func(...string)) {
			db := filepath.Join(dir, "out.db")
			return "sqlite://" + db, func(stmts ...string) { execEach(t, sqliteDriver, db, stmts) }
		}},
		{name: "postgres", open: func(t *testing.T, _ string) (string, func(...string)) {
			url := testsrv.Postgres(t)
			return url, func(stmts ...string) {
				for _, s := range stmts {
					if err := pgExec(url, s); err != nil {
						t.Fatalf("%s: %v", s, err)
					}
				}
			}
		}},
		{name: "mariadb", open: func(t *testing.T, _ string) (string, func(...string)) {
			d := testsrv.MariaDBDatabase(t)
			return d.URL, func(stmts ...string) { execEach(t, "mysql", d.DSN, stmts) }
		}},
	}
	sqliteLog := "CREATE TRIGGER orders_log AFTER INSERT ON orders BEGIN INSERT INTO log VALUES (new.id); END"
	pgFunc := "CREATE FUNCTION log_order() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO log VALUES (NEW.id); RETURN NEW; END $$"
	cases := []struct {
		name  string
		ddl   map[string][]string // by backend (none: skip the backend)
		ok    bool
		found string // what the refusal names
	}{
		{name: "no trigger", ok: true, ddl: map[string][]string{"sqlite": {table}, "postgres": {table}, "mariadb": {table}}},
		{name: "after insert", found: "orders_log", ddl: map[string][]string{
			"sqlite":   {table, "CREATE TABLE log (id TEXT)", sqliteLog},
			"postgres": {table, "CREATE TABLE log (id TEXT)", pgFunc, "CREATE TRIGGER orders_log AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION log_order()"},
			"mariadb":  {table, "CREATE TABLE log (id VARCHAR(40))", "CREATE TRIGGER orders_log AFTER INSERT ON orders FOR EACH ROW INSERT INTO log VALUES (NEW.id)"},
		}},
		{name: "before insert", found: "BEFORE INSERT", ddl: map[string][]string{
			"sqlite":   {table, "CREATE TABLE log (id TEXT)", "CREATE TRIGGER orders_log BEFORE INSERT ON orders BEGIN INSERT INTO log VALUES (new.id); END"},
			"postgres": {table, "CREATE TABLE log (id TEXT)", pgFunc, "CREATE TRIGGER orders_log BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION log_order()"},
			"mariadb":  {table, "CREATE TABLE log (id VARCHAR(40))", "CREATE TRIGGER orders_log BEFORE INSERT ON orders FOR EACH ROW INSERT INTO log VALUES (NEW.id)"},
		}},
		{name: "trigger on another table", ok: true, ddl: map[string][]string{
			"sqlite":   {table, "CREATE TABLE log (id TEXT)", "CREATE TABLE other (id TEXT)", "CREATE TRIGGER other_log AFTER INSERT ON other BEGIN INSERT INTO log VALUES (new.id); END"},
			"postgres": {table, "CREATE TABLE log (id TEXT)", "CREATE TABLE other (id TEXT)", pgFunc, "CREATE TRIGGER other_log AFTER INSERT ON other FOR EACH ROW EXECUTE FUNCTION log_order()"},
			"mariadb":  {table, "CREATE TABLE log (id VARCHAR(40))", "CREATE TABLE other (id VARCHAR(40))", "CREATE TRIGGER other_log AFTER INSERT ON other FOR EACH ROW INSERT INTO log VALUES (NEW.id)"},
		}},
		{name: "foreign key", ok: true, ddl: map[string][]string{
			"postgres": {"CREATE TABLE region (code VARCHAR(10) PRIMARY KEY)", "INSERT INTO region VALUES ('eu')",
				"CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, v INT, region VARCHAR(10) DEFAULT 'eu' REFERENCES region (code))"},
		}},
		{name: "disabled trigger", ok: true, ddl: map[string][]string{
			"postgres": {table, "CREATE TABLE log (id TEXT)", pgFunc, "CREATE TRIGGER orders_log AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION log_order()",
				"ALTER TABLE orders DISABLE TRIGGER orders_log"},
		}},
		{name: "statement trigger", found: "orders_log", ddl: map[string][]string{
			"postgres": {table, "CREATE TABLE log (id TEXT)", "CREATE FUNCTION log_stmt() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO log VALUES ('statement'); RETURN NULL; END $$",
				"CREATE TRIGGER orders_log AFTER INSERT ON orders FOR EACH STATEMENT EXECUTE FUNCTION log_stmt()"},
		}},
		{name: "trigger on a partition", found: "orders_eu", ddl: map[string][]string{
			"postgres": {"CREATE TABLE orders (id VARCHAR(40), v INT, PRIMARY KEY (id, v)) PARTITION BY RANGE (v)",
				"CREATE TABLE orders_eu PARTITION OF orders FOR VALUES FROM (0) TO (100)",
				"CREATE TABLE log (id TEXT)", pgFunc, "CREATE TRIGGER orders_log BEFORE INSERT ON orders_eu FOR EACH ROW EXECUTE FUNCTION log_order()"},
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
					url, exec := be.open(t, dir)
					exec(ddl...)
					writeLines(t, filepath.Join(dir, "in.jsonl"), `{"id": "1", "v": 1}`, `{"id": "2", "v": 2}`)
					conflict := map[string]string{"sqlite": "ON CONFLICT (id, v) DO NOTHING", "postgres": "ON CONFLICT (id, v) DO NOTHING", "mariadb": "ON DUPLICATE KEY UPDATE v = VALUES(v)"}[be.name]
					if c.name != "trigger on a partition" && be.name != "mariadb" {
						conflict = "ON CONFLICT (id) DO NOTHING"
					}
					src := fmt.Sprintf(`
route r {
  from file { path = "in.jsonl" }
  to sql {
    url = %q
    insert_query = %q
  }
}`, url, "INSERT INTO orders (id, v) VALUES (${payload.id}, ${payload.v}) "+conflict)
					p := compileMQB(t, src)
					if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
						t.Fatalf("verdict %s, want effectively-once given its premises: %v", g, p.Routes[0].Reasons)
					}
					var premise *plan.Premise
					for i, pr := range p.Routes[0].Premises {
						if pr.Kind == plan.PremiseNoTriggers {
							premise = &p.Routes[0].Premises[i]
						}
					}
					if premise == nil || premise.Target != "orders" || premise.When != plan.CheckStartup {
						t.Fatalf("the plan has no start-up %s premise on orders: %+v", plan.PremiseNoTriggers, p.Routes[0].Premises)
					}
					opts := testOptions(t)
					opts.BaseDir = dir
					opts.StateDir = filepath.Join(dir, "state")
					res := checkOneKind(t, p, opts, plan.PremiseNoTriggers, c.ok)
					t.Log(res)
					if !c.ok {
						msg := res.Err.Error()
						for _, want := range []string{"table orders has", c.found, "a replay after a crash can fire one again", "DROP "} {
							if !strings.Contains(msg, want) {
								t.Errorf("error %q does not say %q", msg, want)
							}
						}
					}
					runPremiseRoute(t, p, opts, c.ok, c.found)
				})
			}
		})
	}
}

// execEach runs each statement on one fresh connection.
func execEach(t *testing.T, driver, dsn string, stmts []string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
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
