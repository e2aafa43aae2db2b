package sql

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

var withPremise = plantest.WithPremise

type sqlPremiseBackend struct {
	name   string
	url    func(t *testing.T, dir string) string
	ignore string // the conflict clause: prefix, suffix
	suffix string
}

func sqlPremiseBackends() []sqlPremiseBackend {
	return []sqlPremiseBackend{
		{name: "sqlite", url: func(t *testing.T, dir string) string { return "sqlite://" + filepath.Join(dir, "out.db") },
			ignore: "INSERT", suffix: " ON CONFLICT DO NOTHING"},
		{name: "postgres", url: func(t *testing.T, _ string) string { return testsrv.Postgres(t) },
			ignore: "INSERT", suffix: " ON CONFLICT DO NOTHING"},
		{name: "mariadb", url: func(t *testing.T, _ string) string { return testsrv.MariaDBDatabase(t).URL },
			ignore: "INSERT IGNORE", suffix: ""},
	}
}

// TestPremiseUniqueKey: a unique-key premise holds only when some UNIQUE
// or PRIMARY KEY index of the table has all its columns among the
// premise's; a route whose premise fails is refused before any record
// moves, with the table, the columns, the reason and the fix.
func TestPremiseUniqueKey(t *testing.T) {
	type tc struct {
		name, ddl string
		table     string
		cols      []string
		ok        bool
		only      string // backend, or "" for all
	}
	cases := []tc{
		{name: "no index", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT)", table: "orders", cols: []string{"id"}},
		{name: "primary key", ddl: "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, region VARCHAR(10), v INT)", table: "orders", cols: []string{"id"}, ok: true},
		{name: "unique constraint", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT, UNIQUE (id))", table: "orders", cols: []string{"id"}, ok: true},
		{name: "unique index", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT); CREATE UNIQUE INDEX orders_id ON orders (id)", table: "orders", cols: []string{"id"}, ok: true},
		{name: "plain index", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT); CREATE INDEX orders_id ON orders (id)", table: "orders", cols: []string{"id"}},
		{name: "index wider than the key", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT, UNIQUE (id, region))", table: "orders", cols: []string{"id"}},
		{name: "index within the key", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT, UNIQUE (id))", table: "orders", cols: []string{"region", "id"}, ok: true},
		{name: "composite key", ddl: "CREATE TABLE orders (id VARCHAR(40), region VARCHAR(10), v INT, PRIMARY KEY (region, id))", table: "orders", cols: []string{"id", "region"}, ok: true},
		{name: "case folds", ddl: "CREATE TABLE orders (ID VARCHAR(40) PRIMARY KEY, region VARCHAR(10), v INT)", table: "orders", cols: []string{"Id"}, ok: true},
		{name: "missing table", ddl: "CREATE TABLE other (id VARCHAR(40) PRIMARY KEY, region VARCHAR(10), v INT)", table: "orders", cols: []string{"id"}},
		{name: "rowid alias", only: "sqlite", ddl: "CREATE TABLE orders (id INTEGER PRIMARY KEY, region TEXT, v INT)", table: "orders", cols: []string{"id"}, ok: true},
		{name: "partial unique index", only: "sqlite", ddl: "CREATE TABLE orders (id TEXT, region TEXT, v INT); CREATE UNIQUE INDEX orders_id ON orders (id) WHERE v > 0", table: "orders", cols: []string{"id"}},
		{name: "expression index", only: "sqlite", ddl: "CREATE TABLE orders (id TEXT, region TEXT, v INT); CREATE UNIQUE INDEX orders_id ON orders (lower(id))", table: "orders", cols: []string{"id"}},
		{name: "partial unique index", only: "postgres", ddl: "CREATE TABLE orders (id TEXT, region TEXT, v INT); CREATE UNIQUE INDEX orders_id ON orders (id) WHERE v > 0", table: "orders", cols: []string{"id"}},
		{name: "deferrable", only: "postgres", ddl: "CREATE TABLE orders (id TEXT, region TEXT, v INT, UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)", table: "orders", cols: []string{"id"}},
		{name: "include columns", only: "postgres", ddl: "CREATE TABLE orders (id TEXT, region TEXT, v INT); CREATE UNIQUE INDEX orders_id ON orders (id) INCLUDE (region)", table: "orders", cols: []string{"id"}, ok: true},
		{name: "schema and quoted names", only: "postgres", ddl: `CREATE SCHEMA shop; CREATE TABLE shop."Orders" ("Id" TEXT PRIMARY KEY, region TEXT, v INT)`, table: `shop."Orders"`, cols: []string{`"Id"`}, ok: true},
		{name: "quoted name is not folded", only: "postgres", ddl: `CREATE TABLE orders ("Id" TEXT PRIMARY KEY, id TEXT, region TEXT, v INT)`, table: "orders", cols: []string{"id"}},
		{name: "other schema", only: "postgres", ddl: `CREATE SCHEMA shop; CREATE TABLE shop.orders (id TEXT PRIMARY KEY, region TEXT, v INT); CREATE TABLE orders (id TEXT, region TEXT, v INT)`, table: "orders", cols: []string{"id"}},
		{name: "database-qualified", only: "mariadb", ddl: "CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, region VARCHAR(10), v INT)", table: "DB.orders", cols: []string{"id"}, ok: true},
	}
	for _, be := range sqlPremiseBackends() {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				if c.only != "" && c.only != be.name {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					url := be.url(t, dir)
					table := c.table
					if strings.HasPrefix(table, "DB.") {
						table = "`" + url[strings.LastIndex(url, "/")+1:] + "`." + table[3:]
					}
					id := "id"
					if strings.Contains(c.ddl, `"Id"`) && c.ok {
						id = `"Id"`
					}
					// Check runs create_table too; Run runs it again.
					ddl := c.ddl
					for _, kw := range []string{"TABLE", "SCHEMA", "UNIQUE INDEX", "INDEX"} {
						ddl = strings.ReplaceAll(ddl, "CREATE "+kw+" ", "CREATE "+kw+" IF NOT EXISTS ")
					}
					writeLines(t, filepath.Join(dir, "in.jsonl"), `{"id": "1", "region": "eu", "v": 1}`, `{"id": "2", "region": "us", "v": 2}`)
					src := fmt.Sprintf(`
route r {
  from file { path = "in.jsonl" }
  to sql {
    url = %q
    create_table = %q
    insert_query = %q
  }
}`, url, ddl, fmt.Sprintf("%s INTO %s (%s, region, v) VALUES (${payload.id}, ${payload.region}, ${payload.v})%s", be.ignore, table, id, be.suffix))
					p := compileMQB(t, src)
					p.Routes[0].Premises = nil // the compiler's own, read from create_table: this test checks its hand-made one
					p = withPremise(t, p, plan.Premise{Kind: plan.PremiseUniqueKey, When: plan.CheckStartup, Target: table, Columns: c.cols})
					opts := testOptions(t)
					opts.BaseDir = dir
					opts.StateDir = filepath.Join(dir, "state")
					res := runtime.Check(context.Background(), p, opts)
					if len(res) == 1 && res[0].Premise.Kind == "" && c.name == "missing table" &&
						(strings.Contains(res[0].Err.Error(), "does not exist") || strings.Contains(res[0].Err.Error(), "no such table")) {
						return // the insert is prepared at start-up: refused before the premise
					}
					if len(res) != 1 || res[0].OK != c.ok {
						t.Fatalf("check = %v, want ok %v", res, c.ok)
					}
					t.Log(res[0])
					if !c.ok {
						msg := res[0].Err.Error()
						for _, want := range []string{table, "(" + strings.Join(c.cols, ", ") + ")", "the conflict clause absorbs a replay", "CREATE UNIQUE INDEX"} {
							if c.name == "missing table" && want == "CREATE UNIQUE INDEX" {
								want = "does not exist"
							}
							if !strings.Contains(msg, want) {
								t.Errorf("error %q does not say %q", msg, want)
							}
						}
					}
					runPremiseRoute(t, p, opts, c.ok)
				})
			}
		})
	}
}

// runPremiseRoute runs route r of p, which reads two records: with its
// premises holding (ok) it writes both; otherwise it is refused before
// the first record, with an error that says each of refusal.
func runPremiseRoute(t *testing.T, p plan.Plan, opts runtime.Options, ok bool, refusal ...string) {
	t.Helper()
	st, err := runtime.Run(context.Background(), p, opts)
	if ok {
		if err != nil || st.Route("r").Out != 2 {
			t.Fatalf("run: %+v, %v", st, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "refused before the first record") {
		t.Fatalf("run with a failed premise: %+v, %v", st, err)
	}
	for _, want := range refusal {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if st.Route("r").In != 0 {
		t.Errorf("a refused route read records: %+v", st)
	}
}
