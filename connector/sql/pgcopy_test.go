package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// bulk_copy in binary stores what the row-by-row insert stores, value for
// value, and refuses what it refuses: each case is one batch of a clean
// record and the case's record, written by a bulk_copy sink and by a
// row-by-row sink (report_outcome keeps it row by row) into twin tables.
// A value whose binary form is not certain (a float for an integer
// column, an integer out of range, text that is not plain digits) sends
// its batch through text COPY, so the server's parser decides. The same
// holds for a sink committing at the route's commit (pgcommit.go), whose
// failed COPYs roll back to their savepoint.
func TestPostgresBulkCopyBinary(t *testing.T) {
	for _, onCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync on commit %v", onCommit), func(t *testing.T) { testPostgresBulkCopyBinary(t, onCommit) })
	}
}

func testPostgresBulkCopyBinary(t *testing.T, onCommit bool) {
	url := testsrv.Postgres(t)
	cols := []string{"i2", "i4", "i8", "f8", "b", "vc", "c3", "j", "jb", "t"}
	ddl := `(id TEXT PRIMARY KEY, i2 SMALLINT, i4 INTEGER, i8 BIGINT, f8 DOUBLE PRECISION, b BOOLEAN,
		vc VARCHAR(5), c3 CHARACTER(3), j JSON, jb JSONB, t TEXT)`
	sink := func(table string, attrs map[string]plan.Value) runtime.Sink {
		parts := []plan.Part{lit("INSERT INTO " + table + " (id, " + strings.Join(cols, ", ") + ") VALUES ("), ex(`meta["mqb.id"]`)}
		for _, c := range cols {
			parts = append(parts, lit(", "), ex("payload."+c))
		}
		attrs["url"] = strV(url)
		attrs["create_table"] = strV("CREATE TABLE " + table + " " + ddl)
		attrs["insert_query"] = tmplV(append(parts, lit(")"))...)
		s, err := newServerSinkForTest(t, attrs)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bulk := sink("bulk", map[string]plan.Value{"bulk_copy": {Type: plan.TBool, Bool: true}})
	rows := sink("rows", map[string]plan.Value{"report_outcome": {Type: plan.TBool, Bool: true}})
	if bulk.(*sqlSink).server.copyOIDs == nil {
		t.Fatal("bulk_copy sink does not load in binary")
	}
	if onCommit {
		bulk.(runtime.CommitSyncSink).SyncOnCommit()
	}
	clean := map[string]any{"i2": int64(12), "i4": int64(-5), "i8": int64(1) << 40, "f8": 2.5, "b": true,
		"vc": "abc", "c3": "ab", "j": `{"a": 1}`, "jb": `{"b": [1, 2]}`, "t": "tab\there \\ \"q\" ünï"}
	for n, tc := range []struct {
		name    string
		v       map[string]any
		binary  bool // the batch goes in binary
		refused bool // the case's record is refused
	}{
		{"native values", clean, true, false},
		{"integers as text", map[string]any{"i2": "7", "i4": "-0042", "i8": "9223372036854775807", "f8": int64(1)<<53 + 1}, true, false},
		{"nulls", map[string]any{}, true, false},
		{"false and empty", map[string]any{"b": false, "t": "", "vc": "", "c3": ""}, true, false},
		{"float for an integer", map[string]any{"i4": 3.0}, false, false},
		{"fraction for an integer", map[string]any{"i4": 3.5}, false, true},
		{"smallint out of range", map[string]any{"i2": int64(40000)}, false, true},
		{"integer with a plus", map[string]any{"i4": "+5"}, false, false},
		{"integer with spaces", map[string]any{"i8": " 5 "}, false, false},
		{"exponent for an integer", map[string]any{"i4": "1e3"}, false, true},
		{"boolean as text", map[string]any{"b": "yes"}, false, false},
		{"text for a float", map[string]any{"f8": "1.5"}, false, false},
		{"varchar too long", map[string]any{"vc": "abcdef"}, true, true},
		{"character too long", map[string]any{"c3": "abcd"}, true, true},
		{"character with trailing spaces", map[string]any{"c3": "ab   "}, true, false},
		{"not json", map[string]any{"jb": "{nope"}, true, true},
		{"a number as json", map[string]any{"j": int64(5), "jb": 2.5}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := func() []*runtime.Record {
				return []*runtime.Record{valueRecord(fmt.Sprintf("clean%d", n), clean), valueRecord(fmt.Sprintf("case%d", n), tc.v)}
			}
			before := bulk.(*sqlSink).server.copyBinDone.Load()
			b, r := batch(), batch()
			if err := bulk.Write(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if err := rows.Write(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if binary := bulk.(*sqlSink).server.copyBinDone.Load() > before; binary != tc.binary && !tc.refused {
				t.Errorf("loaded in binary %v, want %v", binary, tc.binary)
			}
			for i := range b {
				if (b[i].Refused() != "") != (r[i].Refused() != "") {
					t.Errorf("record %d: bulk_copy refused %q, row by row %q", i, b[i].Refused(), r[i].Refused())
				}
			}
			if got := b[1].Refused() != ""; got != tc.refused {
				t.Errorf("case record refused %v (%q), want %v", got, b[1].Refused(), tc.refused)
			}
		})
	}
	if err := bulk.(runtime.CommitSyncSink).Sync(); err != nil {
		t.Fatal(err)
	}
	q := `SELECT id, to_jsonb(x)::text FROM %s x`
	got, want := pgQuery(t, url, fmt.Sprintf(q, "bulk"), scanPairs[string]), pgQuery(t, url, fmt.Sprintf(q, "rows"), scanPairs[string])
	if len(got) != len(want) {
		t.Errorf("%d rows by bulk_copy, %d row by row", len(got), len(want))
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("row %s: bulk_copy stored %s, row by row %s", id, got[id], w)
		}
	}
}
