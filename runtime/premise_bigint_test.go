package runtime

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBigIntIDsStayDistinct: ids past 2^53 (and past int64) that differ
// in their last digit stay two rows, with every digit, bound as
// parameters and rendered in a template. They used to decode to one
// float64 and collapse into one row.
func TestBigIntIDsStayDistinct(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id": 12345678901234567890, "n": 9007199254740993}`,
		`{"id": 12345678901234567891, "n": 9007199254740992}`,
		`{"id": 123456789012345678901234567890, "n": 1}`,
		`{"id": 123456789012345678901234567891, "n": 2}`,
	)
	p := compileMQB(t, `
route big {
  from file { path = "in.jsonl" }
  to sql {
    url = "sqlite://out.db"
    create_table = "CREATE TABLE t (id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, n INTEGER)"
    insert_query = "INSERT INTO t (id, key, n) VALUES (${payload.id}, ${"k-" + string(payload.id)}, ${payload.n}) ON CONFLICT (id) DO NOTHING"
  }
}`)
	st := runIn(t, dir, p).Route("big")
	if st.Out != 4 || st.DeadLettered+st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
	rows := sqliteMap[string](t, filepath.Join(dir, "out.db"), "SELECT id, key || ' ' || n FROM t")
	want := map[string]string{
		"12345678901234567890":           "k-12345678901234567890 9007199254740993",
		"12345678901234567891":           "k-12345678901234567891 9007199254740992",
		"123456789012345678901234567890": "k-123456789012345678901234567890 1",
		"123456789012345678901234567891": "k-123456789012345678901234567891 2",
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %v", rows)
	}
	for id, w := range want {
		if rows[id] != w {
			t.Errorf("row %s = %q, want %q (all: %s)", id, rows[id], w, strings.Join(keys(rows), " "))
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
