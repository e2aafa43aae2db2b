package sql

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestMultiRowShapes: only insert_query of one VALUES row, with nothing
// after it that reads a parameter, is written in chunks.
func TestMultiRowShapes(t *testing.T) {
	tests := []struct {
		name  string
		parts []plan.Part
		want  string // the chunk statement of 2 rows, "" when refused
	}{
		{"do nothing", []plan.Part{lit("INSERT INTO t (id, n) VALUES ("), ex("payload.id"), lit(", "), ex("payload.n"), lit(") ON CONFLICT (id) DO NOTHING")},
			"INSERT INTO t (id, n) VALUES (?, ?), (?, ?) ON CONFLICT (id) DO NOTHING"},
		{"literal and call in the row", []plan.Part{lit("insert into t(id, n, at) values("), ex("payload.id"), lit(", coalesce("), ex("payload.n"), lit(", 0), 'x,)')")},
			"insert into t(id, n, at) values(?, coalesce(?, 0), 'x,)'), (?, coalesce(?, 0), 'x,)')"},
		{"or ignore", []plan.Part{lit("INSERT OR IGNORE INTO t VALUES ("), ex("payload.id"), lit(")")},
			"INSERT OR IGNORE INTO t VALUES (?), (?)"},
		{"replace into", []plan.Part{lit("REPLACE INTO t (id) VALUES ("), ex("payload.id"), lit(")")},
			"REPLACE INTO t (id) VALUES (?), (?)"},
		{"do update from excluded", []plan.Part{lit("INSERT INTO t (id, n) VALUES ("), ex("payload.id"), lit(", "), ex("payload.n"), lit(") ON CONFLICT (id) DO UPDATE SET n = t.n + excluded.n")},
			"INSERT INTO t (id, n) VALUES (?, ?), (?, ?) ON CONFLICT (id) DO UPDATE SET n = t.n + excluded.n"},
		{"parameter after the row", []plan.Part{lit("INSERT INTO t (id, n) VALUES ("), ex("payload.id"), lit(", 1) ON CONFLICT (id) DO UPDATE SET n = "), ex("payload.n")}, ""},
		{"returning", []plan.Part{lit("INSERT INTO t (id) VALUES ("), ex("payload.id"), lit(") RETURNING id")}, ""},
		{"two rows already", []plan.Part{lit("INSERT INTO t (id) VALUES ("), ex("payload.id"), lit("), ("), ex("payload.n"), lit(")")}, ""},
		{"or rollback", []plan.Part{lit("INSERT OR ROLLBACK INTO t (id) VALUES ("), ex("payload.id"), lit(")")}, ""},
		{"select", []plan.Part{lit("INSERT INTO t (id) SELECT "), ex("payload.id"), lit(" WHERE true")}, ""},
		{"with", []plan.Part{lit("WITH x AS (SELECT 1) INSERT INTO t (id) VALUES ("), ex("payload.id"), lit(")")}, ""},
		{"second statement", []plan.Part{lit("INSERT INTO t (id) VALUES ("), ex("payload.id"), lit("); DELETE FROM t")}, ""},
		{"comment", []plan.Part{lit("INSERT INTO t (id) VALUES ("), ex("payload.id"), lit(") -- c")}, ""},
		{"no parameter", []plan.Part{lit("INSERT INTO t (id) VALUES (1)")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := multiRowInsert(tt.parts)
			got := ""
			if ok {
				got = m.statement(2)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMultiRowLikeRowByRow writes the same batches through a sink writing
// in multi-row chunks and one writing row by row, and wants the same
// table (rowids included), the same records refused for the same reasons
// and the same count of rows absorbed by the conflict clause. The batches
// repeat keys inside a chunk and hold rows the table refuses, so chunks
// fail and are written again row by row.
func TestMultiRowLikeRowByRow(t *testing.T) {
	const (
		check = " CHECK (n >= 0)"
		keyed = "CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL" + check + ")"
	)
	tests := []struct {
		name, ddl, insert string
	}{
		{"do nothing", keyed, "INSERT INTO t (id, n) VALUES (?, ?) ON CONFLICT (id) DO NOTHING"},
		{"accumulating update", keyed, "INSERT INTO t (id, n) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET n = t.n + excluded.n"},
		// FAIL keeps the rows a failing statement wrote before the bad
		// one: without the savepoint they would be written twice.
		{"column on conflict fail, no key", "CREATE TABLE t (id TEXT, n INTEGER NOT NULL ON CONFLICT FAIL" + check + ")",
			"INSERT INTO t (id, n) VALUES (?, ?)"},
		{"insert or fail on the key", keyed, "INSERT OR FAIL INTO t (id, n) VALUES (?, ?)"},
		{"replace", keyed, "REPLACE INTO t (id, n) VALUES (?, ?)"},
		{"or ignore", keyed, "INSERT OR IGNORE INTO t (id, n) VALUES (?, ?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			multi := writeBatches(t, tt.ddl, tt.insert, true)
			rowwise := writeBatches(t, tt.ddl, tt.insert, false)
			if multi.chunks == 0 {
				t.Fatal("no chunk was written whole: the test would prove nothing")
			}
			if multi.absorbed != rowwise.absorbed {
				t.Errorf("absorbed %d in chunks, %d row by row", multi.absorbed, rowwise.absorbed)
			}
			if multi.refused != rowwise.refused {
				t.Errorf("refused in chunks:\n%s\nrow by row:\n%s", multi.refused, rowwise.refused)
			}
			if multi.table != rowwise.table {
				t.Errorf("table in chunks:\n%s\nrow by row:\n%s", multi.table, rowwise.table)
			}
			if rowwise.refused == "" {
				t.Error("no record refused: the test would not exercise the fallback")
			}
		})
	}
}

type writeOutcome struct {
	table, refused string
	absorbed       int64
	chunks         int64
}

// writeBatches writes three batches of records with repeated keys (in the
// same chunk and across batches), NULLs
// into a NOT NULL column, negative numbers a CHECK refuses and a value
// that cannot be bound, through a sink with insert (its ? standing for
// payload.id and payload.n) on a new table made by ddl.
func writeBatches(t *testing.T, ddl, insert string, chunked bool) writeOutcome {
	t.Helper()
	db := filepath.Join(t.TempDir(), "o.db")
	q, n, _ := strings.Cut(insert, "?, ?")
	n = strings.Replace(n, ")", "", 1)
	parts := []plan.Part{lit(q), ex("payload.id"), lit(", "), ex("payload.n"), lit(")" + n)}
	node := plan.Node{ID: "s", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
		"url":          tmplV(lit("sqlite://"), lit(db)),
		"create_table": strV(ddl),
		"insert_query": tmplV(parts...),
	}}
	ctx := context.Background()
	sink, err := runtime.BuildSink(ctx, "r", "json", &node, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := sink.(*sqlSink)
	if s.multi == nil {
		t.Fatalf("%s: not written in chunks", insert)
	}
	if !chunked {
		s.multi.close()
		s.multi = nil
	}
	s.countAbsorbed()
	var refused strings.Builder
	i := 0
	for _, size := range []int{200, 150, 7} {
		var recs []*runtime.Record
		for range size {
			var v any = int64(i)
			switch {
			case i%89 == 5:
				v = nil
			case i%113 == 7:
				v = int64(-1)
			case i%101 == 9:
				v = func() {}
			}
			key := i % 250 // the later batches repeat keys of the first
			if i%13 == 3 {
				key = (i - 1) % 250 // and some repeat the record before
			}
			r := &runtime.Record{}
			r.SetPayload(nil, map[string]any{"id": fmt.Sprintf("k%d", key), "n": v})
			recs = append(recs, r)
			i++
		}
		if err := s.Write(ctx, recs); err != nil {
			t.Fatal(err)
		}
		if held := heldValues(s); held != "" {
			t.Fatalf("after Write the sink still holds %s, yet it says it releases records (the engine reuses their memory)", held)
		}
		for j, r := range recs {
			if why := r.Refused(); why != "" {
				fmt.Fprintf(&refused, "%d %s: %s\n", i-size+j, r.Payload, why)
			}
		}
	}
	out := writeOutcome{refused: refused.String(), absorbed: s.TakeAbsorbed()}
	if s.multi != nil {
		out.chunks = s.multi.chunks
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rows := sqlQuery(t, sqliteDriver, "file:"+db+"?mode=ro", "SELECT rowid, id, n FROM t ORDER BY rowid", func(t *testing.T, rows sqlRows) []string {
		var out []string
		for rows.Next() {
			var rowid, n int64
			var id string
			if err := rows.Scan(&rowid, &id, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%d %s %d", rowid, id, n))
		}
		return out
	})
	out.table = strings.Join(rows, "\n")
	return out
}

// heldValues names the values bound from records that s still holds, or
// is "": a SQLite sink says it releases records (ReleasesRecords).
func heldValues(s *sqlSink) string {
	if !s.ReleasesRecords() {
		return "nothing, and says it does not forget records"
	}
	var held []string
	for i, v := range s.vals {
		if v != nil {
			held = append(held, fmt.Sprintf("vals[%d] = %v", i, v))
		}
	}
	for i, v := range s.nv {
		if v.Value != nil {
			held = append(held, fmt.Sprintf("nv[%d] = %v", i, v.Value))
		}
	}
	if s.multi != nil {
		for i, v := range s.multi.nv {
			if v.Value != nil {
				held = append(held, fmt.Sprintf("multi.nv[%d] = %v", i, v.Value))
			}
		}
	}
	return strings.Join(held, ", ")
}

// BenchmarkSQLiteSinkWrite: the SQLite sink alone, batches of 1024 new
// rows (id TEXT PRIMARY KEY, amount, body; ON CONFLICT (id) DO NOTHING)
// written in multi-row chunks and row by row.
//
//	go test -run '^$' -bench SQLiteSinkWrite -benchtime 200x ./connector/sql/
func BenchmarkSQLiteSinkWrite(b *testing.B) {
	for _, chunked := range []bool{true, false} {
		name := "row_by_row"
		if chunked {
			name = "chunks"
		}
		b.Run(name, func(b *testing.B) {
			node := plan.Node{ID: "s", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
				"url":          tmplV(lit("sqlite://"), lit(filepath.Join(b.TempDir(), "o.db"))),
				"create_table": strV(`CREATE TABLE orders (id TEXT PRIMARY KEY, amount INTEGER, body TEXT)`),
				"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex("payload.id"), lit(", "),
					ex("payload.amount"), lit(", "), ex("payload.body"), lit(") ON CONFLICT (id) DO NOTHING")),
			}}
			ctx := context.Background()
			sink, err := runtime.BuildSink(ctx, "r", "json", &node, runtime.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer sink.Close()
			s := sink.(*sqlSink)
			if !chunked {
				s.multi.close()
				s.multi = nil
			}
			const batch = 1024
			recs := make([]*runtime.Record, batch)
			n := 0
			var cpu time.Duration // the CPU the writes took: the machine may be shared
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for j := range recs {
					r := &runtime.Record{}
					r.SetPayload(nil, map[string]any{"id": fmt.Sprintf("o-%d", n), "amount": int64(n), "body": fmt.Sprintf("order number %d", n)})
					recs[j] = r
					n++
				}
				b.StartTimer()
				cpu0 := processCPU()
				if err := s.Write(ctx, recs); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - cpu0
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/row")
		})
	}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
