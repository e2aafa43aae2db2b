package sql

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// splitRec is a record keyed id whose payload holds amount and body (nil
// for none).
type splitRec struct {
	id           string
	amount, body any
}

func (r splitRec) record() *runtime.Record {
	rec := valueRecord(r.id, map[string]any{"amount": r.amount, "body": r.body})
	if r.id == "" {
		delete(rec.Meta, runtime.MetaID) // no identity: refused as it is bound
	}
	return rec
}

// A split write (pgsplit.go) leaves the table as the staged statement
// alone does, batch by batch: each case writes the same batches through
// two sinks, one making split writes and one not, into two tables made
// alike, and compares every column of every row and the rows refused.
// Where a case says so, the split sink must have written batches by COPY
// and had COPY refuse some (a key in the table it did not write, a value
// the column refuses), written again by the staged statement.
func TestPostgresSplitWriteMatchesStaged(t *testing.T) {
	url := testsrv.Postgres(t)
	odd := []string{`q"uote`, `back\slash`, `\N`, "tab\tnew\nline", `NULL`, ``, ` pad `, `ünï`, `{brace}`, `a,b`}
	var oddRecs []splitRec
	for i, s := range odd {
		oddRecs = append(oddRecs, splitRec{fmt.Sprint("o", i), int64(i), s}, splitRec{s, int64(-i), nil})
	}
	// A batch of ~1 MB of COPY text whose second row meets a row already
	// in the table: the server fails the COPY long before the sink has
	// bound the rest, which the staged statement must then write too.
	large := []splitRec{{"l-0", int64(0), nil}, {"pre", int64(1), "again"}}
	for i := 2; i < 20000; i++ {
		large = append(large, splitRec{fmt.Sprint("l-", i), int64(i), strings.Repeat("x", 40)})
	}
	// Part 1 beside the COPY (pgaside.go): more than a chunk of rows of
	// keys written before, a third of them deleted since (which part 1
	// writes again), among new keys; then the same with a row part 1
	// refuses.
	var aside1, aside2, aside3 []splitRec
	for i := range 1500 {
		aside1 = append(aside1, splitRec{fmt.Sprint("s-", i), int64(i), nil})
		aside2 = append(aside2, splitRec{fmt.Sprint("s-", i), int64(10000 + i), "again"}, splitRec{fmt.Sprint("t-", i), int64(i), nil})
		var amount any = int64(20000 + i)
		if i == 1000 {
			amount = "twelve"
		}
		aside3 = append(aside3, splitRec{fmt.Sprint("u-", i), int64(i), nil}, splitRec{fmt.Sprint("s-", i), amount, "third"})
	}
	// Part 1 only: every key written before, so the COPY writes no row
	// (and part 1 commits waiting for the disk itself).
	var again []splitRec
	for i := range 1500 {
		again = append(again, splitRec{fmt.Sprint("s-", i), int64(30000 + i), "fourth"})
	}
	for _, tc := range []struct {
		name     string
		table    string // %s: the table's name
		conflict string
		pre      string // run on each table before the first batch
		between  string // run on each table between batches
		batches  [][]splitRec
		copied   bool // some batch went by COPY
		missed   bool // COPY refused some batch
		off      bool // the table gets no split writes (pgsplit.go says why)
		aside    bool // some write ran part 1 beside the COPY
	}{
		{name: "do nothing, repeats in and across batches", conflict: "ON CONFLICT (id) DO NOTHING",
			batches: [][]splitRec{
				{{"a", int64(1), "x"}, {"b", int64(2), nil}, {"a", int64(3), "y"}, {"c", int64(4), "z"}},
				{{"b", int64(5), "again"}, {"d", int64(6), nil}, {"d", int64(7), nil}},
				{{"e", int64(8), nil}, {"a", int64(9), nil}},
			}, copied: true},
		{name: "accumulate", conflict: "ON CONFLICT (id) DO UPDATE SET amount = %s.amount + EXCLUDED.amount, body = EXCLUDED.body",
			batches: [][]splitRec{
				{{"a", int64(1), "1"}, {"b", int64(2), "2"}, {"a", int64(10), "3"}},
				{{"a", int64(100), "4"}, {"c", int64(1), nil}, {"a", int64(1000), "5"}},
				{{"b", int64(5), nil}, {"x", int64(7), "6"}, {"x", int64(70), "7"}, {"x", int64(700), "8"}},
			}, copied: true, missed: true}, // x twice after its COPY: DO UPDATE cannot touch a row twice in a statement
		{name: "latest wins", conflict: "ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount, body = EXCLUDED.body",
			batches: [][]splitRec{
				{{"a", int64(1), "1"}, {"b", int64(2), "2"}},
				{{"c", int64(3), "3"}, {"a", int64(4), "4"}, {"d", int64(5), nil}},
			}, copied: true},
		{name: "rows already in the table", conflict: "ON CONFLICT (id) DO NOTHING",
			pre: "INSERT INTO %s VALUES ('b', 20, 'before'), ('c', 30, NULL)",
			batches: [][]splitRec{
				{{"a", int64(1), nil}, {"b", int64(2), nil}, {"c", int64(3), nil}, {"d", int64(4), nil}},
				{{"e", int64(5), nil}, {"f", int64(6), nil}},
				{{"g", int64(7), nil}, {"b", int64(8), nil}},
			}, copied: true, missed: true},
		{name: "a value the column refuses", conflict: "ON CONFLICT (id) DO NOTHING",
			batches: [][]splitRec{
				{{"a", int64(1), nil}, {"b", "twelve", nil}, {"c", int64(3), nil}},
				{{"d", int64(4), nil}},
				{{"e", int64(5), nil}},
			}, copied: true, missed: true},
		{name: "text COPY must escape", conflict: "ON CONFLICT (id) DO NOTHING",
			batches: [][]splitRec{oddRecs}, copied: true},
		{name: "no conflict clause", conflict: "",
			batches: [][]splitRec{
				{{"a", int64(1), nil}, {"b", int64(2), nil}},
				{{"c", int64(3), nil}, {"a", int64(4), nil}},
				{{"d", int64(5), nil}},
			}, copied: true, missed: true},
		{name: "two-column key with NULLs", table: "CREATE TABLE %s (id TEXT, amount BIGINT, body TEXT, UNIQUE (id, body))",
			conflict: "ON CONFLICT (id, body) DO NOTHING",
			batches: [][]splitRec{
				{{"a", int64(1), "x"}, {"a", int64(2), "y"}, {"a", int64(3), "x"}, {"a", int64(4), nil}, {"a", int64(5), nil}},
				{{"a", int64(6), "y"}, {"b", int64(7), "x"}, {"a", int64(8), nil}},
			}, copied: true},
		{name: "no conflict target, a second unique column", table: "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT UNIQUE, body TEXT)",
			conflict: "ON CONFLICT DO NOTHING",
			batches: [][]splitRec{
				{{"a", int64(1), nil}, {"b", int64(1), nil}, {"c", int64(2), nil}},
				{{"d", int64(3), nil}, {"a", int64(4), nil}, {"e", int64(2), nil}},
				{{"f", int64(5), nil}, {"f", int64(6), nil}, {"g", int64(5), nil}},
				{{"h", int64(7), nil}, {"a", int64(8), nil}, {"h", int64(9), nil}},
				{{"i", int64(10), nil}},
				{{"j", int64(11), nil}, {"a", int64(12), nil}, {"j", int64(7), nil}},
				// k is absorbed by amount's index, yet held by the filter:
				// its next row goes by part 1, which runs after part 2, so
				// z's COPY would take amount 40 before k's row, read first.
				{{"k", int64(11), nil}},
				{{"m", int64(41), nil}},
				{{"k", int64(40), nil}, {"z", int64(40), nil}},
			}, off: true},
		{name: "COPY fails early in a large batch", conflict: "ON CONFLICT (id) DO NOTHING",
			pre:     "INSERT INTO %s VALUES ('pre', 0, 'before')",
			batches: [][]splitRec{large, {{"z", int64(1), nil}}, {{"y", int64(2), nil}}}, copied: true, missed: true},
		{name: "records refused as they are bound", conflict: "ON CONFLICT (id) DO NOTHING",
			batches: [][]splitRec{
				{{"a", int64(1), nil}},
				{{"", int64(2), nil}, {"", int64(3), nil}},
				{{"", int64(4), nil}, {"b", int64(5), nil}, {"a", int64(6), nil}, {"", int64(7), nil}},
			}, copied: true},
		// Two spellings of one key, where the filter holds the first (its
		// row deleted since) and not the second: were part 1 to run after
		// the COPY of part 2, 05 would take the key before 5, read first.
		{name: "two spellings of an integer key", table: "CREATE TABLE %s (id BIGINT PRIMARY KEY, amount BIGINT, body TEXT)",
			conflict: "ON CONFLICT (id) DO NOTHING", between: "DELETE FROM %s WHERE id = 5",
			batches: [][]splitRec{{{"5", int64(1), "first"}}, {{"5", int64(2), "a"}, {"05", int64(3), "b"}}},
			copied:  true, missed: true},
		{name: "two spellings of an integer key, latest wins", table: "CREATE TABLE %s (id BIGINT PRIMARY KEY, amount BIGINT, body TEXT)",
			conflict: "ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount, body = EXCLUDED.body", between: "DELETE FROM %s WHERE id = 5",
			batches: [][]splitRec{{{"5", int64(1), "first"}}, {{"5", int64(2), "a"}, {"05", int64(3), "b"}}},
			copied:  true, missed: true},
		{name: "two spellings of a uuid key", table: "CREATE TABLE %s (id UUID PRIMARY KEY, amount BIGINT, body TEXT)",
			conflict: "ON CONFLICT (id) DO NOTHING", between: "DELETE FROM %s WHERE amount = 1",
			batches: [][]splitRec{{{"123e4567-e89b-12d3-a456-426614174000", int64(1), "first"}},
				{{"123e4567-e89b-12d3-a456-426614174000", int64(2), "a"}, {"123E4567-E89B-12D3-A456-426614174000", int64(3), "b"}}},
			copied: true, missed: true},
		{name: "two spellings under a case-blind collation",
			table:    "CREATE COLLATION IF NOT EXISTS %[1]s_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false); CREATE TABLE %[1]s (id TEXT COLLATE %[1]s_ci PRIMARY KEY, amount BIGINT, body TEXT)",
			conflict: "ON CONFLICT (id) DO NOTHING", between: "DELETE FROM %s WHERE id = 'k'",
			batches: [][]splitRec{{{"k", int64(1), "first"}}, {{"k", int64(2), "a"}, {"K", int64(3), "b"}}},
			copied:  true, missed: true},
		{name: "part 1 beside the COPY", conflict: "ON CONFLICT (id) DO NOTHING",
			between: "DELETE FROM %s WHERE amount %% 3 = 0",
			batches: [][]splitRec{aside1, aside2, aside3}, copied: true, missed: true, aside: true},
		{name: "part 1 beside the COPY, an integer key", table: "CREATE TABLE %s (id BIGINT PRIMARY KEY, amount BIGINT, body TEXT)",
			conflict: "ON CONFLICT (id) DO NOTHING", between: "DELETE FROM %s WHERE amount %% 3 = 0",
			batches: [][]splitRec{intIDs(aside1), intIDs(aside2), intIDs(aside3)}, copied: true, missed: true, aside: true},
		{name: "part 1 beside a COPY of no row", conflict: "ON CONFLICT (id) DO NOTHING",
			between: "DELETE FROM %s WHERE amount %% 3 = 0",
			batches: [][]splitRec{aside1, again, again}, copied: true, aside: true},
		{name: "a row deleted between batches", conflict: "ON CONFLICT (id) DO NOTHING",
			between: "DELETE FROM %s WHERE id = 'a'",
			batches: [][]splitRec{
				{{"a", int64(1), nil}, {"b", int64(2), nil}},
				{{"a", int64(3), nil}, {"c", int64(4), nil}},
				{{"a", int64(5), nil}, {"b", int64(6), nil}, {"d", int64(7), nil}},
			}, copied: true},
	} {
		// In read order the split write binds its rows as its COPY reads
		// them (pgstream.go); in key order, as at concurrency above 1,
		// it binds them all first (both sinks then write in key order).
		for _, keyOrder := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/key order %v", tc.name, keyOrder), func(t *testing.T) {
				base := strings.NewReplacer(" ", "_", ",", "", "-", "_").Replace(tc.name)
				if keyOrder {
					base += "_sorted"
				}
				var contents, refusals [2]string
				var absorbed [2]int64
				for k, split := range []bool{true, false} {
					table := fmt.Sprintf("%s_%v", base, split)
					ddl := tc.table
					if ddl == "" {
						ddl = "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT, body TEXT)"
					}
					conflict := tc.conflict
					if strings.Contains(conflict, "%s") {
						conflict = fmt.Sprintf(conflict, table)
					}
					s, err := newServerSinkForTest(t, map[string]plan.Value{
						"url":          strV(url),
						"create_table": strV(fmt.Sprintf(ddl, table)),
						"insert_query": tmplV(lit("INSERT INTO "+table+" (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
							ex("payload.amount"), lit(", "), ex("payload.body"), lit(") "+conflict))})
					if err != nil {
						t.Fatal(err)
					}
					if on, _, _ := pgSplitting(s); on == tc.off {
						t.Fatalf("split writes %v, want %v", on, !tc.off)
					}
					if !split {
						noSplit(s)
					}
					if keyOrder {
						srv, parts := s.(*sqlSink).server, s.(*sqlSink).insertParts
						srv.order = lockOrderOf(parts, pgConflictTarget(parts), foldPostgres)
					}
					s.(*sqlSink).countAbsorbed()
					if tc.pre != "" {
						if err := pgExec(url, fmt.Sprintf(tc.pre, table)); err != nil {
							t.Fatal(err)
						}
					}
					var refused []string
					for n, batch := range tc.batches {
						if n > 0 && tc.between != "" {
							if err := pgExec(url, fmt.Sprintf(tc.between, table)); err != nil {
								t.Fatal(err)
							}
						}
						var recs []*runtime.Record
						for _, r := range batch {
							recs = append(recs, r.record())
						}
						if err := s.Write(context.Background(), recs); err != nil {
							t.Fatal(err)
						}
						for _, r := range recs {
							if r.Refused() != "" {
								refused = append(refused, r.Meta[runtime.MetaID])
							}
						}
					}
					contents[k] = fmt.Sprint(pgQuery(t, url, `SELECT format('%L,%L,%L', id, amount, body), '' FROM `+table, scanPairs[string]))
					refusals[k] = fmt.Sprint(refused)
					absorbed[k] = s.(*sqlSink).TakeAbsorbed()
					if split {
						_, copied, missed := pgSplitting(s)
						if (copied > 0) != tc.copied || (missed > 0) != tc.missed {
							t.Errorf("%d batches by COPY, %d refused by it; want some by COPY %v, some refused %v", copied, missed, tc.copied, tc.missed)
						}
						if sp := s.(*sqlSink).server.split; sp != nil && (sp.asides.Load() > 0) != (tc.aside && !keyOrder) {
							asides := sp.asides.Load()
							t.Errorf("%d writes ran part 1 beside the COPY, want some %v", asides, tc.aside && !keyOrder)
						}
					}
				}
				if absorbed[0] != absorbed[1] {
					t.Errorf("split writes counted %d rows absorbed by the conflict clause, the staged statement alone %d", absorbed[0], absorbed[1])
				}
				if contents[0] != contents[1] || refusals[0] != refusals[1] {
					t.Errorf("split writes left\n%s\nrefusing %s; the staged statement alone\n%s\nrefusing %s", contents[0], refusals[0], contents[1], refusals[1])
				}
			})
		}
	}
}

// Only a table COPY writes as the statement would gets split writes: a
// trigger, a rule, row-level security, an identity or serial column, a
// VALUES row that is not the bare parameters, or a conflict clause
// naming no plain key (nor a primary key bound to parameters, for DO
// NOTHING without a target) turns them off.
func TestPostgresSplitWriteQualifies(t *testing.T) {
	url := testsrv.Postgres(t)
	const plain = "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT, body TEXT)"
	for _, tc := range []struct {
		name, ddl, values, conflict string
		on                          bool
	}{
		{"plain", plain, "", "ON CONFLICT (id) DO NOTHING", true},
		{"default now", "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT, body TEXT, at TIMESTAMPTZ DEFAULT now())", "", "ON CONFLICT (id) DO NOTHING", true},
		{"foreign key", "CREATE TABLE %[1]s_p (k BIGINT PRIMARY KEY); CREATE TABLE %[1]s (id TEXT PRIMARY KEY, amount BIGINT REFERENCES %[1]s_p, body TEXT); INSERT INTO %[1]s_p VALUES (1), (2)", "", "ON CONFLICT (id) DO NOTHING", true},
		{"trigger", plain + "; CREATE FUNCTION %[1]s_f() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'; CREATE TRIGGER %[1]s_t BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION %[1]s_f()", "", "ON CONFLICT (id) DO NOTHING", false},
		{"statement trigger", plain + "; CREATE FUNCTION %[1]s_f() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END'; CREATE TRIGGER %[1]s_t AFTER UPDATE ON %[1]s FOR EACH STATEMENT EXECUTE FUNCTION %[1]s_f()", "", "ON CONFLICT (id) DO NOTHING", false},
		{"rule", plain + "; CREATE TABLE %[1]s_log (id TEXT); CREATE RULE %[1]s_r AS ON INSERT TO %[1]s DO ALSO INSERT INTO %[1]s_log VALUES (NEW.id)", "", "", false},
		{"row-level security", plain + "; ALTER TABLE %[1]s ENABLE ROW LEVEL SECURITY", "", "ON CONFLICT (id) DO NOTHING", false},
		{"identity", "CREATE TABLE %s (n BIGINT GENERATED ALWAYS AS IDENTITY, id TEXT PRIMARY KEY, amount BIGINT, body TEXT)", "", "ON CONFLICT (id) DO NOTHING", false},
		{"serial", "CREATE TABLE %s (n BIGSERIAL, id TEXT PRIMARY KEY, amount BIGINT, body TEXT)", "", "ON CONFLICT (id) DO NOTHING", false},
		{"an expression in VALUES", plain, "lower", "ON CONFLICT (id) DO NOTHING", false},
		{"no conflict target", plain, "", "ON CONFLICT DO NOTHING", true},
		{"no conflict target, a second unique column", "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT UNIQUE, body TEXT)", "", "ON CONFLICT DO NOTHING", false},
		{"no conflict target, an exclusion constraint", "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT, body TEXT, EXCLUDE USING btree (amount WITH =))", "", "ON CONFLICT DO NOTHING", false},
		{"a conflict target, a second unique column", "CREATE TABLE %s (id TEXT PRIMARY KEY, amount BIGINT UNIQUE, body TEXT)", "", "ON CONFLICT (id) DO NOTHING", true},
		{"no conflict target, no primary key", "CREATE TABLE %s (id TEXT UNIQUE, amount BIGINT, body TEXT)", "", "ON CONFLICT DO NOTHING", false},
		{"no conflict target, a key column without a parameter", "CREATE TABLE %s (id TEXT, amount BIGINT, body TEXT, k TEXT DEFAULT 'x', PRIMARY KEY (id, k))", "", "ON CONFLICT DO NOTHING", false},
		{"a constraint named", plain, "", "ON CONFLICT ON CONSTRAINT %s_pkey DO NOTHING", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := "q_" + strings.NewReplacer(" ", "_", "-", "_", ",", "").Replace(tc.name)
			ddl := fmt.Sprintf(tc.ddl, table)
			conflict := tc.conflict
			if strings.Contains(conflict, "%s") {
				conflict = fmt.Sprintf(conflict, table)
			}
			open, closing := "", ""
			if tc.values != "" {
				open, closing = tc.values+"(", ")"
			}
			s, err := newServerSinkForTest(t, map[string]plan.Value{
				"url":          strV(url),
				"create_table": strV(ddl),
				"insert_query": tmplV(lit("INSERT INTO "+table+" (id, amount, body) VALUES ("+open), ex(`meta["mqb.id"]`), lit(closing+", "),
					ex("payload.amount"), lit(", "), ex("payload.body"), lit(") "+conflict))})
			if err != nil {
				t.Fatal(err)
			}
			if on, _, _ := pgSplitting(s); on != tc.on {
				t.Errorf("split writes %v, want %v", on, tc.on)
			}
			// Either way the rows land.
			recs := []*runtime.Record{splitRec{"a", int64(1), nil}.record(), splitRec{"b", int64(2), nil}.record()}
			if err := s.Write(context.Background(), recs); err != nil {
				t.Fatal(err)
			}
			if got := pgQuery(t, url, `SELECT id, amount FROM `+table, scanOrderRows); len(got) != 2 {
				t.Errorf("rows %v, want a and b", got)
			}
		})
	}
}

// A split write runs part 1 after the COPY of part 2 only where two rows
// share a key exactly when their key texts (in their column's form) are
// the same: an allow-list read from the catalog (pgexactkey.go);
// elsewhere part 1 goes first.
func TestPostgresSplitKeyExact(t *testing.T) {
	url := testsrv.Postgres(t)
	for _, tc := range []struct {
		name, ddl, cols, conflict string
		exact                     bool
	}{
		{"text", "(id TEXT PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", true},
		{"text, no target", "(id TEXT PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT DO NOTHING", true},
		{"varchar", "(id VARCHAR PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v", true},
		{"quoted name", `("Id" TEXT PRIMARY KEY, v TEXT)`, `"Id", v`, `ON CONFLICT ("Id") DO NOTHING`, true},
		{"two text columns", "(id TEXT, v TEXT, UNIQUE (id, v))", "id, v", "ON CONFLICT (id, v) DO NOTHING", true},
		{"no conflict clause", "(id BIGINT PRIMARY KEY, v TEXT)", "id, v", "", true},
		{"bigint", "(id BIGINT PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", true},
		{"smallint", "(id SMALLINT PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", true},
		{"numeric", "(id NUMERIC PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
		{"timestamp", "(id TIMESTAMPTZ PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
		{"varchar with a length", "(id VARCHAR(8) PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
		{"character", "(id CHAR(4) PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
		{"uuid", "(id UUID PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", true},
		{"text and an integer", "(id TEXT, n BIGINT, PRIMARY KEY (id, n))", "id, n", "ON CONFLICT (id, n) DO NOTHING", true},
		{"text and a character", "(id TEXT, n CHAR(2), PRIMARY KEY (id, n))", "id, n", "ON CONFLICT (id, n) DO NOTHING", false},
		{"an index of another operator class", "(id TEXT, v TEXT); CREATE UNIQUE INDEX ON %[1]s (id text_pattern_ops)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
		{"a case-blind collation", "(id TEXT COLLATE %[1]s_ci PRIMARY KEY, v TEXT)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
		{"a case-blind index", "(id TEXT, v TEXT); CREATE UNIQUE INDEX ON %[1]s (id COLLATE %[1]s_ci)", "id, v", "ON CONFLICT (id) DO NOTHING", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := "x_" + strings.NewReplacer(" ", "_", "-", "_", ",", "").Replace(tc.name)
			ddl := fmt.Sprintf("CREATE COLLATION IF NOT EXISTS %[1]s_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false); CREATE TABLE %[1]s "+tc.ddl, table)
			s, err := newServerSinkForTest(t, map[string]plan.Value{
				"url":          strV(url),
				"create_table": strV(ddl),
				"insert_query": tmplV(lit("INSERT INTO "+table+" ("+tc.cols+") VALUES ("), ex(`meta["mqb.id"]`), lit(", "), ex("payload.body"), lit(") "+tc.conflict))})
			if err != nil {
				t.Fatal(err)
			}
			sp := s.(*sqlSink).server.split
			if sp == nil {
				t.Fatal("no split writes")
			}
			if sp.exact != tc.exact {
				t.Errorf("exact key %v, want %v", sp.exact, tc.exact)
			}
		})
	}
}

// The filter never forgets a key it holds (a key it forgot would only
// send its rows by COPY, which the table's index checks, but a filter
// that forgets is no filter), says few new keys are held, and empties
// itself once it holds its limit.
func TestKeyFilter(t *testing.T) {
	const limit = 200_000
	f := newKeyFilter(limit)
	seed := maphash.MakeSeed()
	h := func(i int) uint64 { return maphash.String(seed, fmt.Sprint("key-", i)) }
	for i := range 100_000 {
		if f.testAndAdd(h(i)) && i < 10 {
			t.Errorf("key %d tested present in an empty filter", i)
		}
	}
	for i := range 100_000 {
		if !f.testAndAdd(h(i)) {
			t.Fatalf("key %d added, then tested absent", i)
		}
	}
	held := 0
	for i := 1_000_000; i < 1_010_000; i++ {
		if f.testAndAdd(h(i)) {
			held++
		}
	}
	if held > 300 {
		t.Errorf("%d of 10000 new keys tested present, want under 3%%", held)
	}
	for i := 2_000_000; f.added < limit; i++ {
		f.testAndAdd(h(i))
	}
	f.testAndAdd(h(-1))
	if f.added != 1 {
		t.Errorf("%d keys held after the limit of %d was reached, want the filter emptied", f.added, limit)
	}
}

// The shapes a split write takes: the VALUES row must be the listed
// columns' parameters, in order and bare; the key is the conflict
// target's parameters, the primary key's (read later) for DO NOTHING
// without a target, or none without a conflict clause.
func TestSplitTarget(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want string // "COPY …; keys", or "nil"
	}{
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING", "COPY t (id, v) FROM STDIN; [0]"},
		{"insert into s.t(v,id)values(${a},${b}) on conflict (id) do update set v = excluded.v", "COPY s.t (v,id) FROM STDIN; [1]"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b})", "COPY t (id, v) FROM STDIN; []"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT DO NOTHING", "COPY t (id, v) FROM STDIN; primary key"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT ON CONSTRAINT t_pkey DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT ((lower(id))) DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (lower(${a}), ${b}) ON CONFLICT (id) DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}::text, ${b}) ON CONFLICT (id) DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (${b}, ${a}) ON CONFLICT (id) DO NOTHING", "COPY t (id, v) FROM STDIN; [0]"}, // parameters are numbered in text order
		{"INSERT INTO t (id, v) VALUES (${a}, 'x') ON CONFLICT (id) DO NOTHING", "nil"},
		{"INSERT INTO t (id, v, w) VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING", "nil"},
		{"INSERT INTO t VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING", "nil"},
		{"INSERT INTO t AS x (id, v) VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING", "nil"},
		{`INSERT INTO t ("a,b", v) VALUES (${a}, ${b}) ON CONFLICT (v) DO NOTHING`, "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}), (${c}, ${d}) ON CONFLICT (id) DO NOTHING", "nil"},
	} {
		sp := splitTarget(templateParts(tc.q))
		got := "nil"
		if sp != nil {
			got = fmt.Sprintf("%s; %v", sp.copySQL, []int(sp.keys))
			if sp.byPrimaryKey {
				got = sp.copySQL + "; primary key"
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.q, got, tc.want)
		}
	}
}

// intIDs is recs with each id's letters made digits (s-12 is 1012, t-12
// 2012, u-12 3012), for a table keyed by an integer.
func intIDs(recs []splitRec) []splitRec {
	out := make([]splitRec, len(recs))
	for i, r := range recs {
		n, err := strconv.Atoi(r.id[2:])
		if err != nil {
			panic(r.id)
		}
		r.id = strconv.Itoa(int(r.id[0]-'r')*100000 + n)
		out[i] = r
	}
	return out
}

// Key forms: a text is in its column's form only as the server prints
// the value (pgexactkey.go).
func TestKeyFormHolds(t *testing.T) {
	for _, tc := range []struct {
		f    keyForm
		v    string
		want bool
	}{
		{formText, " 05 ", true},
		{formInt, "0", true}, {formInt, "5", true}, {formInt, "-5", true}, {formInt, "1234567890123", true},
		{formInt, "05", false}, {formInt, "-0", false}, {formInt, "+5", false}, {formInt, " 5", false}, {formInt, "5 ", false},
		{formInt, "5.0", false}, {formInt, "", false}, {formInt, "-", false}, {formInt, "1_000", false}, {formInt, "0x10", false},
		{formUUID, "123e4567-e89b-12d3-a456-426614174000", true},
		{formUUID, "123E4567-e89b-12d3-a456-426614174000", false}, {formUUID, "{123e4567-e89b-12d3-a456-426614174000}", false},
		{formUUID, "123e4567e89b12d3a456426614174000", false}, {formUUID, "123e4567-e89b-12d3-a456-42661417400g", false},
	} {
		if got := tc.f.holds([]byte(tc.v)); got != tc.want {
			t.Errorf("form %d holds %q: %v, want %v", tc.f, tc.v, got, tc.want)
		}
	}
}
