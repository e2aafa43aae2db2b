package sql

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func TestSQLReportOutcomeAndBinding(t *testing.T) {
	d := t.TempDir()
	n := plan.Node{ID: "s", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
		"url":            tmplV(lit("sqlite://"), lit(filepath.Join(d, "o.db"))),
		"create_table":   strV(`CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, f REAL, obj TEXT, b INTEGER)`),
		"report_outcome": {Type: plan.TBool, Bool: true},
		"insert_query": tmplV(lit("INSERT INTO t VALUES ("), ex("payload.id"), lit(", "), ex("payload.n"), lit(", "),
			ex("payload.f"), lit(", "), ex("payload.obj"), lit(", "), ex("payload.b"), lit(") ON CONFLICT (id) DO NOTHING")),
	}}
	s, err := runtime.BuildSink(context.Background(), "r", "json", &n, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mk := func(v map[string]any) *runtime.Record {
		r := &runtime.Record{}
		r.SetPayload(nil, v)
		return r
	}
	recs := []*runtime.Record{
		mk(map[string]any{"id": "a", "n": int64(9007199254740993), "f": 1.5, "obj": map[string]any{"k": []any{int64(1)}}, "b": true}),
		mk(map[string]any{"id": "'; DROP TABLE t; --", "n": int64(2)}),
		mk(map[string]any{"id": "c", "n": func() {}}), // unbindable
	}
	if err := s.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if recs[0].Meta[metaSQLOutcome] != "inserted" || recs[1].Meta[metaSQLOutcome] != "inserted" {
		t.Errorf("outcomes %v %v", recs[0].Meta, recs[1].Meta)
	}
	if !strings.Contains(recs[2].Refused(), "cannot be bound") {
		t.Errorf("unbindable value: sinkErr %q", recs[2].Refused())
	}
	again := []*runtime.Record{mk(map[string]any{"id": "a", "n": int64(0)})}
	if err := s.Write(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	if again[0].Meta[metaSQLOutcome] != "existed" {
		t.Errorf("repeat outcome %v", again[0].Meta)
	}
	var n64 int64
	var f float64
	var obj string
	var typ string
	// The sink pins its one connection; read through another.
	db, err := sql.Open(sqliteDriver, "file:"+filepath.Join(d, "o.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	row := db.QueryRow(`SELECT n, f, obj, typeof(n) FROM t WHERE id = 'a'`)
	if err := row.Scan(&n64, &f, &obj, &typ); err != nil {
		t.Fatal(err)
	}
	if n64 != 9007199254740993 || f != 1.5 || obj != `{"k":[1]}` || typ != "integer" {
		t.Errorf("row: n %d (%s) f %v obj %s", n64, typ, f, obj)
	}
}
