package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// stageRecs are records keyed id with amount (nil for none).
func stageRecs(kv ...any) []*runtime.Record {
	var recs []*runtime.Record
	for i := 0; i < len(kv); i += 2 {
		recs = append(recs, valueRecord(kv[i].(string), map[string]any{"amount": kv[i+1]}))
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
		batches               [][]*runtime.Record
		want                  map[string]int
		refused               []string // ids dead-lettered
		staged                int64    // chunks (here one per batch)
	}{
		{"do nothing", "nothing", "ON CONFLICT (id) DO NOTHING",
			[][]*runtime.Record{stageRecs("a", 1, "b", 2, "a", 3), stageRecs("c", "twelve", "d", 4), stageRecs("e", 5, "a", 9, "d", 8)},
			map[string]int{"a": 1, "b": 2, "d": 4, "e": 5}, []string{"c"}, 2},
		{"accumulate", "accumulate", "ON CONFLICT (id) DO UPDATE SET amount = accumulate.amount + EXCLUDED.amount",
			[][]*runtime.Record{stageRecs("a", 1, "b", 2), stageRecs("a", 10, "a", 100, "c", nil), stageRecs("b", 5)},
			map[string]int{"a": 111, "b": 7}, []string{"c"}, 2},
		{"plain insert", "plain", "",
			[][]*runtime.Record{stageRecs("a", 1, "b", 2), stageRecs("c", 3, "a", 4)},
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
			noSplit(s)
			staging, _, _ := pgStaging(s)
			if !staging {
				t.Fatal("insert_query not staged")
			}
			var refused []string
			for _, b := range tc.batches {
				if err := s.Write(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				for _, r := range b {
					if r.Refused() != "" {
						refused = append(refused, r.Meta[runtime.MetaID])
					}
				}
			}
			got := pgQuery(t, url, `SELECT id, amount FROM `+tc.table, scanOrderRows)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || fmt.Sprint(refused) != fmt.Sprint(tc.refused) {
				t.Errorf("rows %v refused %v, want %v and %v", got, refused, tc.want, tc.refused)
			}
			if _, n, off := pgStaging(s); n != tc.staged || off {
				t.Errorf("%d batches staged (off %v), want %d", n, off, tc.staged)
			}
		})
	}
}

// A batch of several chunks goes through the staged statement; one
// holding a refused row anywhere is written row by row, which refuses
// that row alone. Values
// that text arrays must quote (quotes, backslashes, braces, delimiters,
// the word NULL, the empty string) land as they were bound.
func TestPostgresStagedChunks(t *testing.T) {
	url := testsrv.Postgres(t)
	odd := []string{`q"uote`, `back\slash`, `{brace}`, `a,b`, `NULL`, ``, ` pad `, `semi;colon`, "tab\tnew\nline", `ünï`}
	n := 3*stageChunk + 5
	for _, tc := range []struct {
		name string
		bad  []int // indices of rows with an amount the column refuses
	}{
		{"clean", nil},
		{"refused in the first chunk", []int{3}},
		{"refused in a middle chunk", []int{stageChunk + 7}},
		{"refused in two chunks", []int{stageChunk + 1, 3*stageChunk + 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("chunks_%d", len(tc.bad))
			if len(tc.bad) == 1 {
				table += fmt.Sprint(tc.bad[0])
			}
			s, err := newServerSinkForTest(t, map[string]plan.Value{
				"url":          strV(url),
				"create_table": strV(`CREATE TABLE ` + table + ` (id TEXT PRIMARY KEY, amount BIGINT NOT NULL)`),
				"insert_query": tmplV(lit("INSERT INTO "+table+" (id, amount) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
					ex("payload.amount"), lit(") ON CONFLICT (id) DO NOTHING"))})
			if err != nil {
				t.Fatal(err)
			}
			noSplit(s)
			var kv []any
			want := map[string]int{}
			bad := map[int]bool{}
			for _, i := range tc.bad {
				bad[i] = true
			}
			for i := range n {
				id := fmt.Sprintf("k%d", i)
				if i < len(odd) {
					id = odd[i]
				}
				if bad[i] {
					kv = append(kv, id, "twelve")
					continue
				}
				kv = append(kv, id, i)
				want[id] = i
			}
			recs := stageRecs(kv...)
			if err := s.Write(context.Background(), recs); err != nil {
				t.Fatal(err)
			}
			refused := 0
			for i, r := range recs {
				if (r.Refused() != "") != bad[i] {
					t.Errorf("row %d refused %q, want refused %v", i, r.Refused(), bad[i])
				}
				if r.Refused() != "" {
					refused++
				}
			}
			got := pgQuery(t, url, `SELECT id, amount FROM `+table, scanOrderRows)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%d rows landed, want %d (%d refused)", len(got), len(want), refused)
				for id, v := range want {
					if g, ok := got[id]; !ok || g != v {
						t.Errorf("row %q: %d (present %v), want %d", id, g, ok, v)
					}
				}
			}
			wantStaged := int64(0)
			if len(tc.bad) == 0 {
				wantStaged = (int64(n) + stageChunk - 1) / stageChunk
			}
			if _, staged, off := pgStaging(s); staged != wantStaged || off {
				t.Errorf("%d chunks staged (off %v), want %d", staged, off, wantStaged)
			}
		})
	}
}

// Parameter types the staged statement must treat as the row-by-row
// insert does: a value too long for a character(n) column is refused, not
// cut short by a cast; a parameter of an array type (unnest would flatten
// it) turns staging off and the rows go in row by row; arrays sent in
// binary and in text store what the inserts would.
func TestPostgresStagedTypes(t *testing.T) {
	url := testsrv.Postgres(t)
	for _, tc := range []struct {
		name, column string
		recs         []*runtime.Record
		want         map[string]string
		refused      []string
		off          bool
	}{
		{"character(3)", "CHARACTER(3)", stageRecs("a", "xy", "b", "abcd", "c", "abc"),
			map[string]string{"a": "xy", "c": "abc"}, []string{"b"}, false},
		{"text array", "TEXT[]", stageRecs("a", "{x,y}", "b", "{}"),
			map[string]string{"a": "{x,y}", "b": "{}"}, nil, true},
		// Arrays of these go in binary, NULL elements included.
		{"integer", "INTEGER", stageRecs("a", nil, "b", int64(-4), "c", "5"),
			map[string]string{"a": "NULL", "b": "-4", "c": "5"}, nil, false},
		{"boolean", "BOOLEAN", stageRecs("a", true, "b", false, "c", nil),
			map[string]string{"a": "true", "b": "false", "c": "NULL"}, nil, false},
		{"jsonb", "JSONB", stageRecs("a", `{"x": 1}`, "b", "[1,2]"),
			map[string]string{"a": `{"x": 1}`, "b": "[1, 2]"}, nil, false},
		{"jsonb refused", "JSONB", stageRecs("a", `{"x": 1}`, "b", "{nope"),
			map[string]string{"a": `{"x": 1}`}, []string{"b"}, false},
		// These go as text arrays: no binary form for the type, or not for
		// every element.
		{"numeric", "NUMERIC(6,2)", stageRecs("a", "1.005", "b", int64(7)),
			map[string]string{"a": "1.01", "b": "7.00"}, nil, false},
		{"double precision", "DOUBLE PRECISION", stageRecs("a", 2.5, "b", int64(3)),
			map[string]string{"a": "2.5", "b": "3"}, nil, false},
		{"integer, a float among them", "BIGINT", stageRecs("a", int64(1), "b", 2.0, "c", 2.5),
			map[string]string{"a": "1", "b": "2"}, []string{"c"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := strings.NewReplacer(" ", "_", "(", "", ")", "", ",", "").Replace(tc.name)
			s, err := newServerSinkForTest(t, map[string]plan.Value{
				"url":          strV(url),
				"create_table": strV(`CREATE TABLE ` + table + ` (id TEXT PRIMARY KEY, v ` + tc.column + `)`),
				"insert_query": tmplV(lit("INSERT INTO "+table+" (id, v) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
					ex("payload.amount"), lit(") ON CONFLICT (id) DO NOTHING"))})
			if err != nil {
				t.Fatal(err)
			}
			noSplit(s)
			if err := s.Write(context.Background(), tc.recs); err != nil {
				t.Fatal(err)
			}
			var refused []string
			for _, r := range tc.recs {
				if r.Refused() != "" {
					refused = append(refused, r.Meta[runtime.MetaID])
				}
			}
			got := pgQuery(t, url, `SELECT id, coalesce(v::text, 'NULL') FROM `+table, scanPairs[string])
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || fmt.Sprint(refused) != fmt.Sprint(tc.refused) {
				t.Errorf("rows %q refused %v, want %q and %v", got, refused, tc.want, tc.refused)
			}
			_, staged, off := pgStaging(s)
			if off != tc.off {
				t.Errorf("staging off %v, want %v", off, tc.off)
			}
			// A batch of values the server takes goes staged: an array it
			// could not read would send it row by row, landing the same
			// rows the slow way.
			if !tc.off && tc.refused == nil && staged == 0 {
				t.Errorf("the batch went row by row, want it staged")
			}
		})
	}
}
