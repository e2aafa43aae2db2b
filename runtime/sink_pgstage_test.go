package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

func TestStagedInsertShapes(t *testing.T) {
	id, amount := ex(`meta["mqb.id"]`), ex("payload.amount")
	for _, tc := range []struct {
		name  string
		parts []plan.Part
		want  string // "" when the statement is not staged
	}{
		{"do nothing", []plan.Part{lit("INSERT INTO orders (id, amount) VALUES ("), id, lit(", "), amount, lit(") ON CONFLICT (id) DO NOTHING")},
			"INSERT INTO orders (id, amount) SELECT mqb_stage.p1, mqb_stage.p2 FROM pg_temp.mqb_stage ORDER BY mqb_ord ON CONFLICT (id) DO NOTHING"},
		{"expressions and update from excluded", []plan.Part{lit("insert into s.orders(id, amount) values (lower("), id, lit("), coalesce("), amount, lit(", 0) + 1) on conflict (id) do update set amount = orders.amount + excluded.amount")},
			"insert into s.orders(id, amount) SELECT lower(mqb_stage.p1), coalesce(mqb_stage.p2, 0) + 1 FROM pg_temp.mqb_stage ORDER BY mqb_ord on conflict (id) do update set amount = orders.amount + excluded.amount"},
		{"no column list, quoted text", []plan.Part{lit("INSERT INTO orders VALUES ("), id, lit(", 'it''s (VALUES)', "), amount, lit(")")},
			"INSERT INTO orders SELECT mqb_stage.p1, 'it''s (VALUES)', mqb_stage.p2 FROM pg_temp.mqb_stage ORDER BY mqb_ord"},
		{"parameter in the update", []plan.Part{lit("INSERT INTO orders (id, amount) VALUES ("), id, lit(", 1) ON CONFLICT (id) DO UPDATE SET amount = "), amount}, ""},
		{"two rows", []plan.Part{lit("INSERT INTO orders (id) VALUES ("), id, lit("), ("), amount, lit(")")}, ""},
		{"returning", []plan.Part{lit("INSERT INTO orders (id) VALUES ("), id, lit(") RETURNING id")}, ""},
		{"two statements", []plan.Part{lit("INSERT INTO orders (id) VALUES ("), id, lit("); DELETE FROM orders")}, ""},
		{"dollar quoting", []plan.Part{lit("INSERT INTO orders (id, body) VALUES ("), id, lit(", $$x$$)")}, ""},
		{"escape string", []plan.Part{lit("INSERT INTO orders (id, body) VALUES ("), id, lit(`, E'a\'b')`)}, ""},
		{"comment", []plan.Part{lit("INSERT INTO orders (id) VALUES ("), id, lit(") -- note")}, ""},
		{"select", []plan.Part{lit("INSERT INTO orders (id) SELECT "), id}, ""},
		{"cte", []plan.Part{lit("WITH x AS (SELECT 1) INSERT INTO orders (id) VALUES ("), id, lit(")")}, ""},
		{"no parameter", []plan.Part{lit("INSERT INTO orders (id) VALUES ('a')")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := stagedInsert(tc.parts)
			if got := st.insert; ok != (tc.want != "") || got != tc.want {
				t.Errorf("staged %v %q\nwant %q", ok, got, tc.want)
			}
		})
	}
}

// stageRecs are records keyed id with amount (nil for none).
func stageRecs(kv ...any) []*Record {
	var recs []*Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, &Record{Meta: map[string]string{metaID: kv[i].(string)}, value: map[string]any{"amount": kv[i+1]}})
	}
	return recs
}

// A staged batch lands what the row-by-row inserts land: a repeat within
// the batch absorbed by DO NOTHING (the first one kept), an accumulating
// DO UPDATE adding a key's amounts even when the key is twice in a batch,
// a refused row dead-lettered alone. The staged form is used for every
// batch it can write, and the row-by-row path for the others.
func TestPostgresStagedInsert(t *testing.T) {
	url := testsrv.Postgres(t)
	for _, tc := range []struct {
		name, table, conflict string
		batches               [][]*Record
		want                  map[string]int
		refused               []string // ids dead-lettered
		staged                int64
	}{
		{"do nothing", "nothing", "ON CONFLICT (id) DO NOTHING",
			[][]*Record{stageRecs("a", 1, "b", 2, "a", 3), stageRecs("c", "twelve", "d", 4), stageRecs("e", 5, "a", 9, "d", 8)},
			map[string]int{"a": 1, "b": 2, "d": 4, "e": 5}, []string{"c"}, 2},
		{"accumulate", "accumulate", "ON CONFLICT (id) DO UPDATE SET amount = accumulate.amount + EXCLUDED.amount",
			[][]*Record{stageRecs("a", 1, "b", 2), stageRecs("a", 10, "a", 100, "c", nil), stageRecs("b", 5)},
			map[string]int{"a": 111, "b": 7}, []string{"c"}, 2},
		{"plain insert", "plain", "",
			[][]*Record{stageRecs("a", 1, "b", 2), stageRecs("c", 3, "a", 4)},
			map[string]int{"a": 1, "b": 2, "c": 3}, []string{"a"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newServerSinkForTest(t, map[string]plan.Value{
				"url":          strV(url),
				"create_table": strV(fmt.Sprintf(`CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT NOT NULL, doc JSONB)`, tc.table)),
				"insert_query": tmplV(lit("INSERT INTO "+tc.table+" (id, amount, doc) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
					ex("payload.amount"), lit(", "), ex(`{"n": payload.amount}`), lit(") "+tc.conflict))})
			if err != nil {
				t.Fatal(err)
			}
			if s.server.stage == nil {
				t.Fatal("insert_query not staged")
			}
			var refused []string
			for _, b := range tc.batches {
				if err := s.Write(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				for _, r := range b {
					if r.sinkErr != "" {
						refused = append(refused, r.Meta[metaID])
					}
				}
			}
			got := pgQuery(t, url, `SELECT id, amount FROM `+tc.table, scanOrderRows)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || fmt.Sprint(refused) != fmt.Sprint(tc.refused) {
				t.Errorf("rows %v refused %v, want %v and %v", got, refused, tc.want, tc.refused)
			}
			if n := s.server.staged.Load(); n != tc.staged || s.server.stageOff.Load() {
				t.Errorf("%d batches staged (off %v), want %d", n, s.server.stageOff.Load(), tc.staged)
			}
		})
	}
}
