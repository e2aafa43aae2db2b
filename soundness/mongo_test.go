package main

import (
	"bytes"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A line of the input becomes the document the mongodb source reads back
// as the same record in every run directory: its fields in order after a
// growing _id, every integer int64 holds kept exact, a wider one as its
// text; a line that is not a JSON object is no document.
func TestMongoDoc(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // relaxed extended JSON; "" for no document
	}{
		{`{"id":"k-1","seq":3,"qty":2}`, `{"_id":{"$oid":"6a0000000000000000000007"},"id":"k-1","seq":3,"qty":2}`},
		{`{"big":9007199254740993,"id":12345678901234567000}`, `{"_id":{"$oid":"6a0000000000000000000007"},"big":9007199254740993,"id":"12345678901234567000"}`},
		{`{"a":{"b":[1,"x",null,true]},"f":1.5}`, `{"_id":{"$oid":"6a0000000000000000000007"},"a":{"b":[1,"x",null,true]},"f":1.5}`},
		{`{}`, `{"_id":{"$oid":"6a0000000000000000000007"}}`},
		{`not json`, ""},
		{`{"id":"k-1","qty":`, ""},
		{`[1,2,3]`, ""},
		{`42`, ""},
		{`{"id":}`, ""},
		{`{"id":1} {"id":2}`, ""},
	} {
		doc, ok := mongoDoc(tc.line, 7)
		if tc.want == "" {
			if ok {
				t.Errorf("%s: made a document %v of a line that is not a JSON object", tc.line, doc)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no document", tc.line)
			continue
		}
		got, err := bson.MarshalExtJSON(doc, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.line, got, tc.want)
		}
	}
	a, b := mongoID(255), mongoID(256)
	if bytes.Compare(a[:], b[:]) >= 0 {
		t.Errorf("_ids do not grow with the line: %v, then %v", a, b)
	}
}

// The start marks of a capture_new file are read off mqbc's metrics, and
// off its log for a route that resumed from a checkpoint, with where it
// starts reading.
func TestMarkGateReadsMetricsAndLog(t *testing.T) {
	body := []byte(`# HELP mqb_commit_lag_records Records read but not yet covered by the committed checkpoint.
mqb_commit_lag_records{route="route_a"} 0
mqb_commit_lag_records{route="route_b"} 3
mqb_records_deduplicated_total{route="route_a"} 1
`)
	for _, tc := range []struct {
		name, route string
		want        float64
		ok          bool
	}{
		{"mqb_commit_lag_records", "route_a", 0, true},
		{"mqb_commit_lag_records", "route_b", 3, true},
		{"mqb_records_deduplicated_total", "route_a", 1, true},
		{"mqb_records_deduplicated_total", "route_b", 0, false},
		{"mqb_commit_lag", "route_a", 0, false},
	} {
		got, ok := metricValue(body, tc.name, tc.route)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s{route=%q} = %v, %v; want %v, %v", tc.name, tc.route, got, ok, tc.want, tc.ok)
		}
	}
	w := &mongoWatch{addr: "127.0.0.1:1", routes: []string{"route_a", "route_b"}, captureNew: true}
	w.logLine([]byte(`{"time":"x","level":"INFO","msg":"resuming from checkpoint","route":"route_a","collection":"d.in","after":"(none)","next_index":7}`))
	w.logLine([]byte(`{"time":"x","level":"INFO","msg":"mongodb source: capturing documents inserted after the largest _id","route":"route_b","collection":"d.in","after":"(none)"}`))
	if w.marksCommitted() {
		t.Errorf("route_b neither resumed nor answered: its mark is not known to be committed")
	}
	if w.from["route_a"] != 7 || w.from["route_b"] != 0 {
		t.Errorf("where the routes start reading: %v, want route_a at 7, route_b at 0", w.from)
	}
	w.logLine([]byte(`{"time":"x","level":"INFO","msg":"resuming from checkpoint","route":"route_b","collection":"d.in","after":"(none)","next_index":1}`))
	if !w.marksCommitted() {
		t.Errorf("both routes resumed from a checkpoint, yet their marks are not taken as committed")
	}
}
