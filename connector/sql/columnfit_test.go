package sql

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestMySQLKeyColumnFits: MariaDB stores a key a column cannot hold as the
// nearest value it can under INSERT IGNORE (in strict mode too): ids past
// the column's range became its largest value, long strings were cut
// short, text in an integer column became 0, so distinct ids became one
// row and the later records were dropped as repeats while the run said
// out 5. Such a record is dead-lettered with the reason; what fits is
// written exactly.
func TestMySQLKeyColumnFits(t *testing.T) {
	in := []string{
		`{"id": 12345678901234567890}`,
		`{"id": 12345678901234567891}`,
		`{"id": "abcdefghij1"}`,
		`{"id": "abcdefghij2"}`,
		`{"id": 3000000000}`,
		`{"id": "42"}`,
	}
	tests := []struct {
		col   string
		query string
		rows  []string // what the table holds, sorted
	}{
		{"id BIGINT PRIMARY KEY", "INSERT IGNORE INTO t (id) VALUES (${payload.id})", []string{"3000000000", "42"}},
		{"id BIGINT UNSIGNED PRIMARY KEY", "INSERT IGNORE INTO t (id) VALUES (${payload.id})", []string{"12345678901234567890", "12345678901234567891", "3000000000", "42"}},
		{"id INT PRIMARY KEY", "INSERT IGNORE INTO t (id) VALUES (${payload.id})", []string{"42"}},
		{"id VARCHAR(10) PRIMARY KEY", "INSERT IGNORE INTO t (id) VALUES (${payload.id})", []string{"3000000000", "42"}},
		{"id VARCHAR(10) PRIMARY KEY", "INSERT INTO t (id) VALUES (${payload.id}) ON DUPLICATE KEY UPDATE id = id", []string{"3000000000", "42"}},
		{"id VARCHAR(40) PRIMARY KEY", "INSERT IGNORE INTO t (id) VALUES (${payload.id})", []string{"12345678901234567890", "12345678901234567891", "3000000000", "42", "abcdefghij1", "abcdefghij2"}},
	}
	for _, tc := range tests {
		t.Run(tc.col+" "+strings.Fields(tc.query)[1], func(t *testing.T) {
			db := testsrv.MariaDBDatabase(t)
			dir := t.TempDir()
			writeLines(t, filepath.Join(dir, "in.jsonl"), in...)
			p := compileMQB(t, `
route fit {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "`+db.URL+`"
    create_table = "CREATE TABLE IF NOT EXISTS t (`+tc.col+`)"
    insert_query = "`+tc.query+`"
  }
}`)
			if g := p.Routes[0].Guarantee; g != "effectively-once" {
				t.Fatalf("verdict %s: the test wants a route proven effectively-once", g)
			}
			st := runIn(t, dir, p).Route("fit")
			rows := myQuery(t, db.DSN, "SELECT CAST(id AS CHAR) FROM t ORDER BY 1", func(t *testing.T, r sqlRows) []string {
				var out []string
				for r.Next() {
					var s string
					if err := r.Scan(&s); err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
				return out
			})
			slices.Sort(rows)
			if !slices.Equal(rows, tc.rows) {
				t.Errorf("table holds %v, want %v", rows, tc.rows)
			}
			wantDL := len(in) - len(tc.rows)
			if st.Out != int64(len(tc.rows)) || st.DeadLettered != int64(wantDL) {
				t.Errorf("stats %+v, want out %d, dead-lettered %d", st, len(tc.rows), wantDL)
			}
			for _, l := range readDLQLines(t, filepath.Join(dir, "dlq.jsonl")) {
				if !strings.Contains(l.Error, "does not fit column id") {
					t.Errorf("dlq reason %q", l.Error)
				}
			}
		})
	}
}
