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

// TestPremiseUpdateLeavesUniques: a DO UPDATE into a table the file does
// not fully describe is effectively-once only if no unique index but the
// conflict key holds a column the update moves (a second unique index
// decides which later records are refused, and a replay after a crash
// lands records the first run refused). The plan carries the premise; the
// runtime reads the live table's unique indexes and refuses the route
// when one breaks it.
func TestPremiseUpdateLeavesUniques(t *testing.T) {
	type backend struct {
		name, clause string
		open         func(t *testing.T, dir string) (url string, exec func(string))
	}
	backends := []backend{
		{name: "sqlite", clause: "ON CONFLICT (id) DO UPDATE SET body = excluded.body, tag = excluded.tag", open: func(t *testing.T, dir string) (string, func(string)) {
			db := filepath.Join(dir, "out.db")
			return "sqlite://" + db, func(ddl string) { execSQL(t, sqliteDriver, db, ddl) }
		}},
		{name: "postgres", clause: "ON CONFLICT (id) DO UPDATE SET body = excluded.body, tag = excluded.tag", open: func(t *testing.T, _ string) (string, func(string)) {
			url := testsrv.Postgres(t)
			return url, func(ddl string) {
				if err := pgExec(url, ddl); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "mariadb", clause: "ON DUPLICATE KEY UPDATE body = VALUES(body), tag = VALUES(tag)", open: func(t *testing.T, _ string) (string, func(string)) {
			d := testsrv.MariaDBDatabase(t)
			return d.URL, func(ddl string) { execSQL(t, "mysql", d.DSN, ddl) }
		}},
	}
	cases := []struct {
		name  string
		index string // a second index on the table, or ""
		ok    bool
		// refusedOn: backends whose statement names no conflict key, where
		// the check cannot tell the key's index from another.
		refusedOn string
	}{
		{name: "only the key", ok: true},
		{name: "unique index on a moved column", index: "CREATE UNIQUE INDEX orders_tag ON orders (tag)"},
		{name: "unique index on a moved column and another", index: "CREATE UNIQUE INDEX orders_tag_n ON orders (n, tag)"},
		{name: "unique index on a column left alone", index: "CREATE UNIQUE INDEX orders_n ON orders (n)", ok: true},
		{name: "plain index on a moved column", index: "CREATE INDEX orders_tag ON orders (tag)", ok: true},
		{name: "unique index over the key and a moved column", index: "CREATE UNIQUE INDEX orders_id_tag ON orders (id, tag)", ok: true, refusedOn: "mariadb"},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			for _, c := range cases {
				if c.refusedOn == be.name {
					c.ok = false
				}
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					url, exec := be.open(t, dir)
					exec("CREATE TABLE orders (id VARCHAR(40) PRIMARY KEY, body TEXT, tag VARCHAR(40), n INT)")
					if c.index != "" {
						exec(c.index)
					}
					writeLines(t, filepath.Join(dir, "in.jsonl"), `{"id": "1", "body": "a", "tag": "x"}`, `{"id": "2", "body": "b", "tag": "y"}`)
					p := compileMQB(t, fmt.Sprintf(`
route r {
  from file { path = "in.jsonl" }
  to sql {
    url          = %q
    insert_query = "INSERT INTO orders (id, body, tag) VALUES (${payload.id}, ${payload.body}, ${payload.tag}) %s"
  }
}`, url, be.clause))
					if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
						t.Fatalf("verdict %s, want effectively-once given the premises: %v", g, p.Routes[0].Reasons)
					}
					var premise *plan.Premise
					for i, pr := range p.Routes[0].Premises {
						if pr.Kind == plan.PremiseUpdateLeavesUniques {
							premise = &p.Routes[0].Premises[i]
						}
					}
					if premise == nil || strings.Join(premise.Columns, ",") != "body,tag" || premise.When != plan.CheckStartup {
						t.Fatalf("premise %+v, want the moved columns body, tag checked at start-up", premise)
					}
					opts := testOptions(t)
					opts.BaseDir = dir
					opts.StateDir = filepath.Join(dir, "state")
					res := checkOneKind(t, p, opts, plan.PremiseUpdateLeavesUniques, c.ok)
					if !c.ok && (!strings.Contains(res.Err.Error(), "orders_") || !strings.Contains(res.Err.Error(), "tag")) {
						t.Errorf("the refusal does not name the index and the column: %v", res.Err)
					}
					st, err := runtime.Run(context.Background(), p, opts)
					if c.ok {
						if err != nil || st.Route("r").Out != 2 {
							t.Fatalf("run: %+v, %v", st, err)
						}
						return
					}
					if err == nil || !strings.Contains(err.Error(), "premise not met") || st.Route("r").In != 0 {
						t.Fatalf("run with a broken premise: %+v, %v", st, err)
					}
				})
			}
		})
	}
}
