package sql

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
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, n INTEGER)"
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

// TestBigIntIntoNumericColumnDeadLettered: SQLite stores an integer past
// int64 bound into a column of INTEGER, NUMERIC or REAL affinity (past
// 2^53 for REAL) as a rounded REAL, so 12345678901234567890 and …891 became one row and the
// second record was taken as a repeat (out 4, rows 3). Such a record goes
// to the DLQ with the reason; a TEXT or untyped column keeps every digit.
func TestBigIntIntoNumericColumnDeadLettered(t *testing.T) {
	tests := []struct {
		col      string
		rows, dl int
		options  string // table options after the column list
	}{
		{"id INTEGER NOT NULL UNIQUE", 2, 2, ""},
		{"id BIGINT PRIMARY KEY", 2, 2, ""},
		{"id NUMERIC PRIMARY KEY", 2, 2, ""},
		{"id DOUBLE PRECISION PRIMARY KEY", 1, 3, ""}, // past 2^53 (…993) a float rounds too
		{"id TEXT PRIMARY KEY", 4, 0, ""},
		{"id ANY PRIMARY KEY", 4, 0, " STRICT"}, // a STRICT table's ANY keeps the text
		{"id ANY PRIMARY KEY", 2, 2, ""},        // elsewhere ANY is NUMERIC
		{"id PRIMARY KEY", 4, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.col+tc.options, func(t *testing.T) {
			dir := t.TempDir()
			writeLines(t, filepath.Join(dir, "in.jsonl"),
				`{"id": 12345678901234567890}`,
				`{"id": 12345678901234567891}`,
				`{"id": 9007199254740993}`,
				`{"id": 9007199254740992}`,
			)
			p := compileMQB(t, `
route big {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (`+tc.col+`)`+tc.options+`"
    insert_query = "INSERT INTO t AS x (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING"
  }
}`)
			st := runIn(t, dir, p).Route("big")
			rows := sqliteMap[string](t, filepath.Join(dir, "out.db"), "SELECT CAST(id AS TEXT), typeof(id) FROM t")
			if len(rows) != tc.rows || st.DeadLettered != int64(tc.dl) || st.Out != int64(tc.rows) {
				t.Fatalf("rows %v, stats %+v; want %d rows and %d dead-lettered", rows, st, tc.rows, tc.dl)
			}
			for id, typ := range rows {
				if typ == "real" && !strings.Contains(tc.col, "DOUBLE") {
					t.Errorf("id %s stored as a REAL", id)
				}
			}
			if tc.dl > 0 {
				got := readDLQLines(t, filepath.Join(dir, "dlq.jsonl"))
				if len(got) != tc.dl || !strings.Contains(got[0].Error, "declare the column TEXT") {
					t.Errorf("dlq %+v", got)
				}
			}
		})
	}
}
