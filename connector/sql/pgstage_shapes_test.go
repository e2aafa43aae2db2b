package sql

import (
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

func TestStagedInsertShapes(t *testing.T) {
	id, amount := plantest.Ex(`meta["mqb.id"]`), plantest.Ex("payload.amount")
	for _, tc := range []struct {
		name  string
		parts []plan.Part
		want  string // "" when the statement is not staged
	}{
		{"do nothing", []plan.Part{plantest.Lit("INSERT INTO orders (id, amount) VALUES ("), id, plantest.Lit(", "), amount, plantest.Lit(") ON CONFLICT (id) DO NOTHING")},
			"INSERT INTO orders (id, amount) SELECT mqb_stage.p1, mqb_stage.p2 FROM unnest($1, $2) WITH ORDINALITY AS mqb_stage(p1, p2, mqb_ord) ORDER BY mqb_stage.mqb_ord ON CONFLICT (id) DO NOTHING"},
		{"expressions and update from excluded", []plan.Part{plantest.Lit("insert into s.orders(id, amount) values (lower("), id, plantest.Lit("), coalesce("), amount, plantest.Lit(", 0) + 1) on conflict (id) do update set amount = orders.amount + excluded.amount")},
			"insert into s.orders(id, amount) SELECT lower(mqb_stage.p1), coalesce(mqb_stage.p2, 0) + 1 FROM unnest($1, $2) WITH ORDINALITY AS mqb_stage(p1, p2, mqb_ord) ORDER BY mqb_stage.mqb_ord on conflict (id) do update set amount = orders.amount + excluded.amount"},
		{"no column list, quoted text", []plan.Part{plantest.Lit("INSERT INTO orders VALUES ("), id, plantest.Lit(", 'it''s (VALUES)', "), amount, plantest.Lit(")")},
			"INSERT INTO orders SELECT mqb_stage.p1, 'it''s (VALUES)', mqb_stage.p2 FROM unnest($1, $2) WITH ORDINALITY AS mqb_stage(p1, p2, mqb_ord) ORDER BY mqb_stage.mqb_ord"},
		{"parameter in the update", []plan.Part{plantest.Lit("INSERT INTO orders (id, amount) VALUES ("), id, plantest.Lit(", 1) ON CONFLICT (id) DO UPDATE SET amount = "), amount}, ""},
		{"two rows", []plan.Part{plantest.Lit("INSERT INTO orders (id) VALUES ("), id, plantest.Lit("), ("), amount, plantest.Lit(")")}, ""},
		{"returning", []plan.Part{plantest.Lit("INSERT INTO orders (id) VALUES ("), id, plantest.Lit(") RETURNING id")}, ""},
		{"two statements", []plan.Part{plantest.Lit("INSERT INTO orders (id) VALUES ("), id, plantest.Lit("); DELETE FROM orders")}, ""},
		{"dollar quoting", []plan.Part{plantest.Lit("INSERT INTO orders (id, body) VALUES ("), id, plantest.Lit(", $$x$$)")}, ""},
		{"escape string", []plan.Part{plantest.Lit("INSERT INTO orders (id, body) VALUES ("), id, plantest.Lit(`, E'a\'b')`)}, ""},
		{"comment", []plan.Part{plantest.Lit("INSERT INTO orders (id) VALUES ("), id, plantest.Lit(") -- note")}, ""},
		{"select", []plan.Part{plantest.Lit("INSERT INTO orders (id) SELECT "), id}, ""},
		{"cte", []plan.Part{plantest.Lit("WITH x AS (SELECT 1) INSERT INTO orders (id) VALUES ("), id, plantest.Lit(")")}, ""},
		{"no parameter", []plan.Part{plantest.Lit("INSERT INTO orders (id) VALUES ('a')")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := stagedInsert(tc.parts)
			var got string
			if ok {
				got = st.statement()
			}
			if ok != (tc.want != "") || got != tc.want {
				t.Errorf("staged %v %q\nwant %q", ok, got, tc.want)
			}
		})
	}
}
