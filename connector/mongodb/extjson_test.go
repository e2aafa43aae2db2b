package mongodb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

const mongoExtJSONSrc = `
route ext_to_mongo {
  guarantee effectively_once
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to mongodb {
    url        = "%s"
    database   = "%s"
    collection = "docs"
    id_field   = "_id"
  }
}
`

// TestMongoSinkExtendedJSON: a payload value in MongoDB's extended JSON
// (what the mongodb source writes) is stored as the BSON value it stands
// for, in _id and in the body, nested or in an array; an object that
// only looks like one (its first key not a type key) and every plain
// value keep their mapping; one that does not read (a bad hex, a key
// besides $oid) is dead-lettered naming the field. A replay of the whole
// file hits the same _ids: nothing doubles.
func TestMongoSinkExtendedJSON(t *testing.T) {
	const oid = "65a1b2c3d4e5f60718293a4b"
	at := time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC)
	tests := []struct {
		name    string
		payload string // its _id is the document's key below
		field   string // the field looked at ("" none)
		want    any    // the stored value of field
		dlq     string // the DLQ reason should say this ("" stored)
	}{
		{name: "ObjectId _id", payload: `{"_id":{"$oid":"` + oid + `"},"n":1}`, field: "_id", want: mustOID(t, oid)},
		{name: "canonical int64 _id", payload: `{"_id":{"$numberLong":"77"},"n":1}`, field: "_id", want: int64(77)},
		{name: "date", payload: `{"_id":"date","at":{"$date":"2024-01-02T03:04:05.678Z"}}`, field: "at", want: bson.NewDateTimeFromTime(at)},
		{name: "date before 1970", payload: `{"_id":"old","at":{"$date":{"$numberLong":"-86400000"}}}`, field: "at", want: bson.DateTime(-86400000)},
		{name: "int64", payload: `{"_id":"long","n":{"$numberLong":"1099511627776"}}`, field: "n", want: int64(1 << 40)},
		{name: "int32", payload: `{"_id":"int","n":{"$numberInt":"5"}}`, field: "n", want: int32(5)},
		{name: "uuid", payload: `{"_id":"uuid","u":{"$binary":{"base64":"ABEiM0RVZneImaq7zN3u/w==","subType":"04"}}}`, field: "u",
			want: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: []byte{0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}}},
		{name: "nested", payload: `{"_id":"nested","o":{"ref":{"$oid":"` + oid + `"},"list":[{"$date":"2024-01-02T03:04:05.678Z"},2]}}`, field: "o",
			want: bson.D{{Key: "ref", Value: mustOID(t, oid)}, {Key: "list", Value: bson.A{bson.NewDateTimeFromTime(at), int64(2)}}}},
		{name: "plain values", payload: `{"_id":"plain","v":{"a":1,"f":1.5,"s":"$oid","e":{}}}`, field: "v",
			want: bson.D{{Key: "a", Value: int64(1)}, {Key: "f", Value: 1.5}, {Key: "s", Value: "$oid"}, {Key: "e", Value: bson.D{}}}},
		{name: "bad hex", payload: `{"_id":{"$oid":"zz"},"note":"bad hex"}`,
			dlq: `payload field _id: {"$oid":"zz"} is not a valid extended JSON value`},
		{name: "bad date in an array", payload: `{"_id":"bad-date","note":"bad date","o":{"l":[1,{"$date":"nope"}]}}`,
			dlq: `payload field o.l.1: {"$date":"nope"} is not a valid extended JSON value`},
		{name: "key besides $oid", payload: `{"_id":"extra","note":"extra key","r":{"$oid":"` + oid + `","x":1}}`,
			dlq: `payload field r: {"$oid":`},
		// Not opened by a type key: a document as before, which the
		// server refuses for its $ key (FerretDB; MongoDB 5.0+ keeps it).
		{name: "type key not first", payload: `{"_id":"later","note":"later","r":{"x":1,"$oid":"` + oid + `"}}`,
			dlq: `$oid`},
	}
	db, mdb := mongoDB(t)
	dir := t.TempDir()
	var lines []string
	for _, tc := range tests {
		lines = append(lines, tc.payload)
	}
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), lines...)
	src := fmt.Sprintf(mongoExtJSONSrc, db.DSN, db.Name)
	wantDLQ := 0
	for _, tc := range tests {
		if tc.dlq != "" {
			wantDLQ++
		}
	}
	coll := mdb.Collection("docs")
	for run := range 2 { // the second a replay, the checkpoint gone
		if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
			t.Fatal(err)
		}
		st := runtest.RunIn(t, dir, plantest.Compile(t, src)).Route("ext_to_mongo")
		if st.In != int64(len(tests)) || st.Out != int64(len(tests)-wantDLQ) || st.DeadLettered != int64(wantDLQ) {
			t.Errorf("run %d: %+v, want in %d out %d dead-lettered %d", run, st, len(tests), len(tests)-wantDLQ, wantDLQ)
		}
		if n := len(mongoDocs(t, coll)); n != len(tests)-wantDLQ {
			t.Errorf("run %d: %d documents, want %d", run, n, len(tests)-wantDLQ)
		}
	}
	reasons := dlqReasons(t, filepath.Join(dir, "dlq.jsonl"), "note")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dlq != "" {
				var p struct{ Note string }
				json.Unmarshal([]byte(tc.payload), &p)
				t.Logf("DLQ reason: %s", reasons[p.Note])
				if !strings.Contains(reasons[p.Note], tc.dlq) {
					t.Errorf("DLQ reason %q, want it to say %q", reasons[p.Note], tc.dlq)
				}
				return
			}
			var p bson.D
			if err := bson.UnmarshalExtJSON([]byte(tc.payload), false, &p); err != nil {
				t.Fatal(err)
			}
			var got bson.D
			if err := coll.FindOne(context.Background(), bson.D{{Key: "_id", Value: p[0].Value}}).Decode(&got); err != nil {
				t.Fatalf("find _id %v: %v", p[0].Value, err)
			}
			if v := mongoField(got, tc.field); !bsonEqual(t, v, tc.want) {
				t.Errorf("%s = %#v (%T), want %#v (%T)", tc.field, v, v, tc.want, tc.want)
			}
		})
	}
}

func mustOID(t testing.TB, hex string) bson.ObjectID {
	t.Helper()
	id, err := bson.ObjectIDFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// bsonEqual compares two values as BSON: type and bytes.
func bsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	ab, err1 := bson.Marshal(bson.D{{Key: "v", Value: a}})
	bb, err2 := bson.Marshal(bson.D{{Key: "v", Value: b}})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(ab, bb)
}

const mongoCopySrc = `
route copy_docs {
  guarantee effectively_once
  batch_size = 4
  from mongodb {
    url           = "%[1]s"
    database      = "%[2]s"
    collection    = "src"
    poll_interval = 50ms
  }
  dlq { to file { path = "dlq.jsonl" } }
  to mongodb {
    url        = "%[1]s"
    database   = "%[2]s"
    collection = "dst"
    id_field   = "_id"
  }
}
`

// TestMongoToMongo: documents captured from one collection and written to
// another keyed on their own _id arrive byte for byte as they were: an
// ObjectId _id stays an ObjectId, dates stay dates (before 1970 too),
// an int64 an int64, a nested document with its types. A replay from a
// lost checkpoint finds every _id stored: the count stays.
func TestMongoToMongo(t *testing.T) {
	db, mdb := mongoDB(t)
	ctx := context.Background()
	base := time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC)
	var docs []any
	const n = 10
	for i := range n {
		docs = append(docs, bson.D{
			{Key: "_id", Value: bson.NewObjectID()},
			{Key: "at", Value: bson.NewDateTimeFromTime(base.Add(time.Duration(i) * time.Hour))},
			{Key: "old", Value: bson.DateTime(-86400000 * int64(i+1))},
			{Key: "n", Value: int64(1)<<40 + int64(i)},
			{Key: "f", Value: float64(i) + 0.5},
			{Key: "whole", Value: 2.0},
			{Key: "s", Value: fmt.Sprintf("doc %d", i)},
			{Key: "ok", Value: i%2 == 0},
			{Key: "none", Value: nil},
			{Key: "nested", Value: bson.D{
				{Key: "ref", Value: bson.NewObjectID()},
				{Key: "when", Value: bson.NewDateTimeFromTime(base)},
				{Key: "tags", Value: bson.A{"a", int64(i), bson.D{{Key: "deep", Value: bson.NewDateTimeFromTime(base)}}}},
			}},
			{Key: "uuid", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: bytes.Repeat([]byte{byte(i)}, 16)}},
		})
	}
	if _, err := mdb.Collection("src").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := plantest.Compile(t, fmt.Sprintf(mongoCopySrc, db.DSN, db.Name))
	dst := mdb.Collection("dst")
	for run := range 2 { // the second a replay, the checkpoint gone
		if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		opts := runtest.Options()
		opts.BaseDir, opts.StateDir, opts.Registerer = dir, filepath.Join(dir, "state"), reg
		done := func() bool {
			return counter(reg, "mqb_records_out_total")+counter(reg, "mqb_records_dead_lettered_total") >= n
		}
		st := runtest.RunUntil(t, p, opts, 2*time.Minute, done).Route("copy_docs")
		runtest.CheckCounts(t, st)
		if st.In != n || st.Out != n || st.DeadLettered != 0 {
			t.Errorf("run %d: %+v, want in %d out %d", run, st, n, n)
		}
		if c, err := dst.CountDocuments(ctx, bson.D{}); err != nil || c != n {
			t.Errorf("run %d: %d documents in dst (%v), want %d", run, c, err, n)
		}
	}
	want := rawDocs(t, mdb.Collection("src"))
	got := rawDocs(t, dst)
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			t.Errorf("document %s is not in dst", id)
			continue
		}
		if !bytes.Equal(g, w) {
			gj, _ := bson.MarshalExtJSON(g, true, false)
			wj, _ := bson.MarshalExtJSON(w, true, false)
			t.Errorf("document %s arrived as\n%s\nwant\n%s", id, gj, wj)
		}
	}
}

// rawDocs returns coll's documents by the hex of their _id's bytes.
func rawDocs(t testing.TB, coll *mongo.Collection) map[string]bson.Raw {
	t.Helper()
	ctx := context.Background()
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close(ctx)
	out := map[string]bson.Raw{}
	for cur.Next(ctx) {
		out[encodeID(cur.Current.Lookup("_id"))] = bytes.Clone(cur.Current)
	}
	if err := cur.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// counter is the sum of a counter's children in reg (0 when absent).
func counter(reg *prometheus.Registry, name string) int64 {
	mfs, _ := reg.Gather()
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return int64(sum)
}

// TestMongoSinkOwnIDHint: a payload with an _id of its own beside another
// key (a captured document's, in extended JSON) is dead-lettered with a
// hint, and each remedy the hint names works: id_field = "_id" writes the
// document under its ObjectId, map { del payload._id } under the other key.
func TestMongoSinkOwnIDHint(t *testing.T) {
	const oid = "65a1b2c3d4e5f60718293a4b"
	const del = `map { del payload._id }`
	db, mdb := mongoDB(t)
	route := func(coll, step, idField string) string {
		if idField != "" {
			idField = "id_field = " + idField
		}
		return fmt.Sprintf(`
route hint {
  from file { path = "in.jsonl" }
  %s
  dlq { to file { path = "dlq.jsonl" } }
  to mongodb {
    url        = "%s"
    database   = "%s"
    collection = "%s"
    %s
  }
}
`, step, db.DSN, db.Name, coll, idField)
	}
	for i, idField := range []string{`"ref"`, `"${payload.ref}"`, ``} {
		t.Run(fmt.Sprintf("id_field %s", idField), func(t *testing.T) {
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"_id":{"$oid":"`+oid+`"},"ref":"r-1"}`)
			coll := fmt.Sprintf("hint%d", i)
			st := runtest.RunIn(t, dir, plantest.Compile(t, route(coll, "", idField))).Route("hint")
			if st.DeadLettered != 1 {
				t.Fatalf("%+v, want the record dead-lettered", st)
			}
			reason := plantest.ReadDLQLines(t, filepath.Join(dir, "dlq.jsonl"))[0].Error
			for _, remedy := range []string{`id_field = "_id"`, del} {
				if !strings.Contains(reason, remedy) {
					t.Errorf("reason %q does not name %s", reason, remedy)
				}
			}
			// Each remedy, into a collection of its own.
			for j, fix := range []struct{ step, idField string }{{"", `"_id"`}, {del, idField}} {
				dir := t.TempDir()
				plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"_id":{"$oid":"`+oid+`"},"ref":"r-1"}`)
				name := fmt.Sprintf("%s_fix%d", coll, j)
				st := runtest.RunIn(t, dir, plantest.Compile(t, route(name, fix.step, fix.idField))).Route("hint")
				docs := mongoDocs(t, mdb.Collection(name))
				if st.Out != 1 || len(docs) != 1 {
					t.Errorf("remedy %q %s: %+v, %d documents; want it written", fix.step, fix.idField, st, len(docs))
				}
				if _, ok := docs[fmt.Sprint(mustOID(t, oid))]; fix.idField == `"_id"` && !ok {
					t.Errorf("id_field = \"_id\": documents %v, want the ObjectId %s", mongoKeys(docs), oid)
				}
			}
		})
	}
}
