package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestPremiseReplacingMergeTree: the ClickHouse premise holds only for a
// ReplacingMergeTree whose sorting key (and partition key) read columns
// bound to stable values; otherwise the route is refused before a record
// moves, naming the table, the key and the fix.
func TestPremiseReplacingMergeTree(t *testing.T) {
	url, conn := clickhouseDB(t)
	ctx := context.Background()
	tests := []struct {
		name, engine string
		cols         []string
		ok           bool
		want         string
	}{
		{"sorted by the id", "ReplacingMergeTree(v) ORDER BY (order_id)", []string{"order_id"}, true, ""},
		{"sorted by the id and a stable column", "ReplacingMergeTree(v) ORDER BY (order_id, region)", []string{"order_id", "region"}, true, ""},
		{"sorted by something else", "ReplacingMergeTree(v) ORDER BY (region)", []string{"order_id"}, false, "is sorted by (region), which reads region"},
		{"sorted by the id and more", "ReplacingMergeTree(v) ORDER BY (order_id, v)", []string{"order_id"}, false, "which reads v"},
		{"not replacing", "MergeTree ORDER BY (order_id)", []string{"order_id"}, false, "has engine MergeTree, not ReplacingMergeTree"},
		{"empty sorting key", "ReplacingMergeTree(v) ORDER BY tuple()", []string{"order_id"}, false, "empty sorting key"},
		{"partitioned by an unbound column", "ReplacingMergeTree(v) PARTITION BY v ORDER BY (order_id)", []string{"order_id"}, false, "partitioned by v"},
		{"partitioned by the id", "ReplacingMergeTree(v) PARTITION BY intDiv(order_id, 1000) ORDER BY (order_id)", []string{"order_id"}, true, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("events%d", i)
			if err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (order_id UInt64, region String, v UInt64) ENGINE = %s", table, tc.engine)); err != nil {
				t.Fatal(err)
			}
			e := plantest.NewEnv(t)
			plantest.WriteLines(t, e.Input, `{"order_id": 1, "region": "eu", "v": 1}`, `{"order_id": 2, "region": "us", "v": 1}`)
			p := clickhousePlan(e, url, plan.AtLeastOnce, map[string]plan.Value{"table": plantest.Str(table)})
			p = plantest.WithPremise(t, p, plan.Premise{Kind: plan.PremiseReplacingMergeTree, When: plan.CheckStartup, Target: table, Columns: tc.cols})
			opts := runtest.Options()
			res := runtime.Check(ctx, p, opts)
			if len(res) != 1 || res[0].OK != tc.ok {
				t.Fatalf("check = %v, want ok %v", res, tc.ok)
			}
			st, err := runtime.Run(ctx, p, opts)
			if tc.ok {
				if err != nil || st.Route("analytics").Out != 2 {
					t.Fatalf("run: %+v, %v", st, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("run with a failed premise: %+v", st)
			}
			for _, want := range []string{tc.want, table, "ReplacingMergeTree(version) ORDER BY (" + strings.Join(tc.cols, ", ") + ")"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if st.Route("analytics").In != 0 {
				t.Errorf("a refused route read records: %+v", st)
			}
		})
	}
}

// TestPremiseNoViews: a ReplacingMergeTree collapses a replayed row only
// in its own table; a materialized view reading it gets every inserted
// block, a replay's too, and keeps the repeat in the view's table. So a
// route into a table a view reads is refused before any record, naming
// the view and the statement that drops it, and one into a table no view
// reads runs.
func TestPremiseNoViews(t *testing.T) {
	url, conn := clickhouseDB(t)
	ctx := context.Background()
	for _, withView := range []bool{false, true} {
		t.Run(fmt.Sprintf("view=%v", withView), func(t *testing.T) {
			table := fmt.Sprintf("viewed_%v", withView)
			if err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (order_id UInt64, region String, v UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY (order_id)", table)); err != nil {
				t.Fatal(err)
			}
			if withView {
				if err := conn.Exec(ctx, fmt.Sprintf("CREATE MATERIALIZED VIEW %s_by_region ENGINE = SummingMergeTree() ORDER BY region AS SELECT region, count() AS n FROM %s GROUP BY region", table, table)); err != nil {
					t.Fatal(err)
				}
			}
			e := plantest.NewEnv(t)
			plantest.WriteLines(t, e.Input, `{"order_id": 1, "region": "eu", "v": 1}`, `{"order_id": 2, "region": "us", "v": 1}`)
			src := fmt.Sprintf(`
route analytics {
  from file { path = %q }
  to clickhouse {
    url = %q
    table = %q
    columns { order_id = payload.order_id, region = payload.region, v = payload.v }
  }
}`, e.Input, url, table)
			p := plantest.Compile(t, src)
			r := p.Routes[0]
			var premise *plan.Premise
			for i, pr := range r.Premises {
				if pr.Kind == plan.PremiseNoTriggers {
					premise = &r.Premises[i]
				}
			}
			if r.Guarantee != plan.EffectivelyOnce || premise == nil || premise.When != plan.CheckStartup {
				t.Fatalf("verdict %s with premises %+v: want effectively-once resting on a start-up %s premise", r.Guarantee, r.Premises, plan.PremiseNoTriggers)
			}
			st, err := runtime.Run(ctx, p, runtest.Options())
			if !withView {
				if err != nil || st.Route("analytics").Out != 2 {
					t.Fatalf("run: %+v, %v", st, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("run into a table a view reads: %+v", st)
			}
			for _, want := range []string{"refused before the first record", table + "_by_region", "materialized view", "DROP TABLE"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if st.Route("analytics").In != 0 {
				t.Errorf("a refused route read records: %+v", st)
			}
		})
	}
}
