package structural

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
)

// dlqPremiseSrc dead-letters into a table the file does not create, keyed
// by the record's line: the dlq is effectively-once only if the table has
// a unique index on k, a premise of the dlq's own.
const dlqPremiseSrc = `
route keyed_dlq {
  from file { path = "in.jsonl" }
  dlq {
    to sql {
      url          = "sqlite://dead.db"
      insert_query = """INSERT OR IGNORE INTO dlq (k, err) VALUES (${meta["mqb.src.line"]}, ${meta["mqb.error"]})"""
    }
  }
  to file { path = "out", name_by = source_position }
}
`

// TestPremiseOfTheDLQ: the compiler puts the dead-letter table's unique
// index in the plan as a premise (the dlq's effectively-once rests on it),
// and the runtime checks it on the dlq's endpoint before the first record:
// without the index the route is refused, naming the table; with it the
// route runs and dead-letters the bad line once.
func TestPremiseOfTheDLQ(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		ok          bool
	}{
		{"no key", "CREATE TABLE dlq (k TEXT, err TEXT)", false},
		{"primary key", "CREATE TABLE dlq (k TEXT PRIMARY KEY, err TEXT)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"id":"x1"}`, `not json`, `{"id":"x2"}`)
			plantest.SQLiteExec(t, filepath.Join(dir, "dead.db"), tc.table)
			p := plantest.Compile(t, dlqPremiseSrc)
			r := p.Routes[0]
			if !strings.Contains(strings.Join(r.Reasons, "\n"), "dlq: effectively-once") {
				t.Fatalf("reasons %q, want the dlq effectively-once", r.Reasons)
			}
			if !premiseKinds(r.Premises, plan.PremiseUniqueKey, plan.PremiseNoTriggers) || r.Premises[0].Target != "dlq" || r.Premises[1].Target != "dlq" {
				t.Fatalf("premises %+v, want a unique key and no triggers on table dlq", r.Premises)
			}
			if !checkOnePremise(t, p, dir, "table dlq", tc.ok) {
				return
			}
			st := runtest.RunIn(t, dir, p).Route("keyed_dlq")
			if st.In != 3 || st.Out != 2 || st.DeadLettered != 1 {
				t.Errorf("stats %+v, want in 3, out 2, dead-lettered 1", st)
			}
			if rows := runtest.SQLiteMap[string](t, filepath.Join(dir, "dead.db"), "SELECT k, err FROM dlq"); len(rows) != 1 || rows["1"] == "" {
				t.Errorf("dead-letter table holds %v, want the second line (index 1) once", rows)
			}
		})
	}
}
