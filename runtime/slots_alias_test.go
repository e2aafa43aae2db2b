package runtime_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
)

// aliasSrc: file → id → dlq → SQLite, in batches of 16. Nothing keeps a
// record past its write, so the route reuses its batches; every program
// reads a plain field path, so fields are decoded into slots, their values
// kept in the batch (strings aliasing its bytes).
const aliasSrc = `
route aliased {
  batch_size = 16
  from file { path = "in.jsonl" }
  id payload.id
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, s TEXT, n INTEGER, f REAL)"
    insert_query = "INSERT INTO t (id, s, n, f) VALUES (${payload.id}, ${payload.s}, ${payload.n}, ${payload.f}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// TestDecodedFieldsSurviveBatchReuse: over a few hundred reused batches,
// every row holds the values of its own line (escapes, unicode, numbers
// at int64's edges, floats), none those of a later line that reused the
// batch's memory; malformed lines go to the DLQ with a reason.
func TestDecodedFieldsSurviveBatchReuse(t *testing.T) {
	dir := t.TempDir()
	type row struct {
		s string
		n int64
		f float64
	}
	want := map[string]row{}
	var in strings.Builder
	bad := 0
	texts := []string{`plain %d`, `tab\t%d \"q\" \\ \/`, `\u00e9t\u00e9 %d \ud83d\ude00`, `日本 %d`, `%d`}
	for i := range 3000 {
		if i%97 == 5 {
			fmt.Fprintf(&in, "{\"id\": \"o-%d\", \"n\": oops}\n", i)
			bad++
			continue
		}
		n := int64(i) * 3074457345618258 // up to about 2^63
		if i%11 == 0 {
			n = math.MinInt64 + int64(i)
		}
		s := fmt.Sprintf(texts[i%len(texts)], i)
		line := fmt.Sprintf(`{"id": "o-%d", "s": "%s", "skip": {"x": [%d, "y"]}, "n": %d, "f": %d.25}`, i, s, i, n, i)
		fmt.Fprintln(&in, line)
		var dec struct {
			S string
			N int64
			F float64
		}
		if err := json.Unmarshal([]byte(line), &dec); err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("o-%d", i)] = row{dec.S, dec.N, dec.F}
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	st := runIn(t, dir, compileMQB(t, aliasSrc)).Route("aliased")
	if st.Out != int64(len(want)) || st.DeadLettered != int64(bad) {
		t.Errorf("stats %+v, want out %d dead-lettered %d", st, len(want), bad)
	}
	got := sqlQuery(t, plantest.SQLiteDriver, "file:"+filepath.Join(dir, "out.db")+"?mode=ro", "SELECT id, s, n, f FROM t",
		func(t *testing.T, rows sqlRows) map[string]row {
			m := map[string]row{}
			for rows.Next() {
				var id string
				var r row
				if err := rows.Scan(&id, &r.s, &r.n, &r.f); err != nil {
					t.Fatal(err)
				}
				m[id] = r
			}
			return m
		})
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d", len(got), len(want))
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Errorf("%s: row %+v, want %+v", id, g, w)
		}
	}
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(dlq)), "\n")
	if len(lines) != bad {
		t.Fatalf("%d DLQ lines, want %d", len(lines), bad)
	}
	for _, l := range lines {
		var env struct{ Error, Raw string }
		if err := json.Unmarshal([]byte(l), &env); err != nil || !strings.Contains(env.Error, "invalid JSON") || !strings.Contains(env.Raw, "oops") {
			t.Errorf("DLQ line %s (%v): want the line and why it is not JSON", l, err)
		}
	}
}
