package mongodb

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	_ "github.com/mqb-dev/mqb/connector/structural" // the request and switch of the routes below
	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// mongoDB starts (or shares) the MongoDB-protocol server (FerretDB) and
// returns a fresh database and a client on it.
func mongoDB(t *testing.T) (testsrv.Database, *mongo.Database) {
	t.Helper()
	db := testsrv.MongoDB(t)
	c, err := mongo.Connect(options.Client().ApplyURI(db.DSN))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(context.Background()) })
	return db, c.Database(db.Name)
}

// mongoDocs returns every document of coll by _id as extended JSON text,
// failing on an _id seen twice.
func mongoDocs(t testing.TB, coll *mongo.Collection) map[string]bson.D {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	var all []bson.D
	if err := cur.All(ctx, &all); err != nil {
		t.Fatal(err)
	}
	out := map[string]bson.D{}
	for _, d := range all {
		if len(d) == 0 || d[0].Key != "_id" {
			t.Fatalf("document without _id first: %v", d)
		}
		k := fmt.Sprint(d[0].Value)
		if _, dup := out[k]; dup {
			t.Errorf("_id %s stored twice", k)
		}
		out[k] = d
	}
	return out
}

// dlqReasons returns the reason of every DLQ line by the payload's field.
func dlqReasons(t testing.TB, path, field string) map[string]string {
	t.Helper()
	lines := plantest.ReadDLQLines(t, path)
	if lines == nil {
		return nil
	}
	out := map[string]string{}
	for _, l := range lines {
		var p map[string]any
		json.Unmarshal(l.Payload, &p)
		key := fmt.Sprint(p[field])
		if p == nil {
			key = string(l.Payload)
		}
		out[key] = l.Error
	}
	return out
}

const mongoIDFieldSrc = `
route orders_to_mongo {
  guarantee effectively_once
  batch_size  = 16
  concurrency = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to mongodb {
    url        = "%s"
    database   = "%s"
    collection = "orders"
    id_field   = "order_id"
  }
}
`

// TestMongoSinkIDField: the id field's value becomes _id with its JSON type
// (a number stays an integer), a repeat within the input or from a replay
// is absorbed by the unique _id index, and a payload the sink cannot key —
// no field, a null one, its own _id besides, not an object — is
// dead-lettered with the reason, never written under a fresh _id.
func TestMongoSinkIDField(t *testing.T) {
	db, mdb := mongoDB(t)
	dir := t.TempDir()
	var lines []string
	for i := range 50 {
		lines = append(lines, fmt.Sprintf(`{"order_id":"o-%03d","amount":%d,"items":[{"sku":"a","qty":1.5}]}`, i, i))
	}
	for i := 5; i < 10; i++ { // repeats, with another amount: the first written stays
		lines = append(lines, fmt.Sprintf(`{"order_id":"o-%03d","amount":%d}`, i, 1000+i))
	}
	lines = append(lines,
		`{"order_id":7,"amount":7}`,
		`{"order_id":8,"amount":8.0,"ratio":1e2}`,
		`{"amount":3,"note":"no key"}`,
		`{"order_id":null,"note":"null key"}`,
		`{"order_id":"own","_id":"x","note":"own id"}`,
		`[1,2,3]`,
	)
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), lines...)
	src := fmt.Sprintf(mongoIDFieldSrc, db.DSN, db.Name)

	st := runtest.RunIn(t, dir, plantest.Compile(t, src)).Route("orders_to_mongo")
	if st.In != 61 || st.Out != 57 || st.DeadLettered != 4 {
		t.Errorf("first run %+v, want in 61 out 57 dead-lettered 4", st)
	}
	coll := mdb.Collection("orders")
	docs := mongoDocs(t, coll)
	if len(docs) != 52 {
		t.Errorf("%d documents, want 52", len(docs))
	}
	// The two workers write their batches in either order: one of the two
	// amounts is stored, and a replay does not change it.
	firstAmounts := map[string]any{}
	for i := 5; i < 10; i++ {
		id := fmt.Sprintf("o-%03d", i)
		got := mongoField(docs[id], "amount")
		if got != int64(i) && got != int64(1000+i) {
			t.Errorf("%s: amount %v (%T), want int64 %d or %d", id, got, got, i, 1000+i)
		}
		firstAmounts[id] = got
	}
	d := docs["o-001"]
	if len(d) != 4 || d[1].Key != "order_id" || d[2].Key != "amount" || d[3].Key != "items" {
		t.Errorf("o-001 = %v, want _id then the payload's fields in order", d)
	}
	items, _ := mongoField(d, "items").(bson.A)
	if len(items) != 1 || mongoField(items[0].(bson.D), "qty") != 1.5 {
		t.Errorf("o-001 items = %#v", mongoField(d, "items"))
	}
	if n, ok := docs["7"]; !ok {
		t.Errorf("no document with the integer _id 7: %v", mongoKeys(docs))
	} else if _, isInt := n[0].Value.(int64); !isInt {
		t.Errorf("_id 7 is %T, want int64 (the JSON type preserved)", n[0].Value)
	}
	// A number with a fraction or an exponent is a double. (An integer
	// beyond int64 becomes a decimal128, which FerretDB cannot store.)
	if n := docs["8"]; mongoField(n, "amount") != 8.0 || mongoField(n, "ratio") != 100.0 {
		t.Errorf("_id 8 = %v, want amount and ratio doubles", n)
	}
	reasons := dlqReasons(t, filepath.Join(dir, "dlq.jsonl"), "note")
	for note, want := range map[string]string{
		"no key":   "payload has no field order_id",
		"null key": "order_id (id_field) is null",
		"own id":   "has its own _id",
		`[1,2,3]`:  "not a JSON object",
	} {
		if !strings.Contains(reasons[note], want) {
			t.Errorf("dlq reason for %s: %q, want it to say %q", note, reasons[note], want)
		}
	}

	// The same state: nothing new to read, nothing written.
	st = runtest.RunIn(t, dir, plantest.Compile(t, src)).Route("orders_to_mongo")
	if st.In != 0 || st.Out != 0 {
		t.Errorf("second run %+v, want nothing read", st)
	}

	// A replay from the start (the checkpoint lost, as after a crash that
	// took the state with it): every insert hits its _id, nothing doubles.
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	st = runtest.RunIn(t, dir, plantest.Compile(t, src)).Route("orders_to_mongo")
	if st.In != 61 || st.Out != 57 || st.DeadLettered != 4 {
		t.Errorf("replay %+v, want in 61 out 57 dead-lettered 4", st)
	}
	docs = mongoDocs(t, coll)
	if len(docs) != 52 {
		t.Errorf("after the replay %d documents, want 52", len(docs))
	}
	for id, want := range firstAmounts {
		if got := mongoField(docs[id], "amount"); got != want {
			t.Errorf("%s: the replay changed amount %v to %v", id, want, got)
		}
	}
}

// mongoField returns the value of key in d, or nil.
func mongoField(d bson.D, key string) any {
	for _, e := range d {
		if e.Key == key {
			return e.Value
		}
	}
	return nil
}

func mongoKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

const mongoTemplateSrc = `
route orders_to_mongo {
  guarantee effectively_once
  batch_size  = 50
  concurrency = 4
  from file { path = "%s" }
  id payload.customer + "/" + payload.n
  dlq { to file { path = "dlq.jsonl" } }
  to mongodb {
    url        = "%s"
    database   = "%s"
    collection = "orders"
    id_field   = "${meta[\"mqb.id\"]}"
  }
}
`

// TestMongoSinkReplayTemplateID: with the template form of id_field (the
// id step's mqb.id), a run that stopped half-way and a replay of the whole
// input from a fresh checkpoint store each _id once, concurrently written.
func TestMongoSinkReplayTemplateID(t *testing.T) {
	db, mdb := mongoDB(t)
	dir := t.TempDir()
	var all []string
	for i := range 2000 {
		all = append(all, fmt.Sprintf(`{"customer":"c%d","n":"%d","body":"%s"}`, i%7, i, strings.Repeat("x", i%50)))
	}
	plantest.WriteLines(t, filepath.Join(dir, "half.jsonl"), all[:1100]...)
	plantest.WriteLines(t, filepath.Join(dir, "all.jsonl"), all...)

	st := runtest.RunIn(t, dir, plantest.Compile(t, fmt.Sprintf(mongoTemplateSrc, "half.jsonl", db.DSN, db.Name))).Route("orders_to_mongo")
	if st.In != 1100 || st.Out != 1100 {
		t.Errorf("first run %+v, want in 1100 out 1100", st)
	}
	// Another file: its own checkpoint, the first 1100 records replayed.
	st = runtest.RunIn(t, dir, plantest.Compile(t, fmt.Sprintf(mongoTemplateSrc, "all.jsonl", db.DSN, db.Name))).Route("orders_to_mongo")
	if st.In != 2000 || st.Out != 2000 || st.DeadLettered != 0 {
		t.Errorf("replay %+v, want in 2000 out 2000", st)
	}
	docs := mongoDocs(t, mdb.Collection("orders"))
	if len(docs) != 2000 {
		t.Errorf("%d documents, want 2000", len(docs))
	}
	if d, ok := docs["c3/10"]; !ok || mongoField(d, "n") != "10" {
		t.Errorf(`document "c3/10" = %v`, d)
	}
}

const mongoOutcomeSrc = `
route upsert_branch {
  from file { path = "%s" }
  to request {
    call mongodb {
      url            = "%s"
      database       = "%s"
      collection     = "orders"
      id_field       = "id"
      report_outcome = true
    }
    forward switch {
      on = meta["mongodb.outcome"]
      case "inserted" { to file { path = "new.jsonl" } }
      case "existed" { to file { path = "existed.jsonl" } }
      default { to file { path = "unrouted.jsonl" } }
    }
  }
}
`

// TestMongoSinkReportOutcome is the spec's insert-vs-duplicate branch on
// Mongo: the call tags each record mongodb.outcome = inserted | existed,
// the switch routes on it, and a record the call fails (no id field) is
// forwarded untagged to the default.
func TestMongoSinkReportOutcome(t *testing.T) {
	db, mdb := mongoDB(t)
	dir := t.TempDir()
	runtest.InsertedExisted(t, dir, func(input string) plan.Plan {
		return plantest.Compile(t, fmt.Sprintf(mongoOutcomeSrc, input, db.DSN, db.Name))
	}, `{"amount":99}`)
	b, _ := os.ReadFile(filepath.Join(dir, "unrouted.jsonl"))
	if !strings.Contains(string(b), `"amount":99`) || strings.Count(string(b), "\n") != 1 {
		t.Errorf("unrouted.jsonl = %q, want the record without id", b)
	}
	if n := len(mongoDocs(t, mdb.Collection("orders"))); n != 50 {
		t.Errorf("%d documents, want 50", n)
	}
}

// TestMongoSinkMessageID: without id_field each document's _id is the
// record's message_id as a UUID (binary subtype 4); a payload with an _id
// of its own is dead-lettered with a hint rather than silently re-keyed.
func TestMongoSinkMessageID(t *testing.T) {
	db, mdb := mongoDB(t)
	dir := t.TempDir()
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"a":1}`, `{"a":2}`, `{"a":3,"_id":"mine"}`)
	src := fmt.Sprintf(`
route events {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to mongodb { url = "%s", database = "%s", collection = "events" }
}
`, db.DSN, db.Name)
	st := runtest.RunIn(t, dir, plantest.Compile(t, src)).Route("events")
	if st.In != 3 || st.Out != 2 || st.DeadLettered != 1 {
		t.Errorf("%+v, want in 3 out 2 dead-lettered 1", st)
	}
	docs := mongoDocs(t, mdb.Collection("events"))
	if len(docs) != 2 {
		t.Errorf("%d documents, want 2", len(docs))
	}
	for _, d := range docs {
		bin, ok := d[0].Value.(bson.Binary)
		if !ok || bin.Subtype != bson.TypeBinaryUUID || len(bin.Data) != 16 {
			t.Errorf("_id %#v, want a UUID (binary subtype 4)", d[0].Value)
			continue
		}
		if u, _ := uuid.FromBytes(bin.Data); u.Version() != 7 {
			t.Errorf("_id %s is not a message_id (UUIDv7)", u)
		}
	}
	if r := dlqReasons(t, filepath.Join(dir, "dlq.jsonl"), "a")["3"]; !strings.Contains(r, `id_field = \"_id\"`) && !strings.Contains(r, `id_field = "_id"`) {
		t.Errorf("dlq reason %q, want the id_field hint", r)
	}
}

// TestMongoSinkSecretURL: the url's password shows nowhere in the error of
// a server that cannot be reached, whether the url is written in the file
// or read from the environment with env().
func TestMongoSinkSecretURL(t *testing.T) {
	const url = "mongodb://mqb:hunter2secret@127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"
	t.Setenv("MQB_TEST_MONGO_URL", url)
	for _, tc := range []struct{ name, attr string }{
		{"in the file", `"` + url + `"`},
		{"from env()", `"${env(\"MQB_TEST_MONGO_URL\")}"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"id":"a"}`)
			src := `
route secret {
  from file { path = "in.jsonl" }
  to mongodb {
    url        = ` + tc.attr + `
    database   = "shop"
    collection = "orders"
    id_field   = "id"
  }
}
`
			opts := runtest.Options()
			opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
			_, err := runtime.Run(context.Background(), plantest.Compile(t, src), opts)
			if err == nil {
				t.Fatal("run against a closed port succeeded")
			}
			if strings.Contains(err.Error(), "hunter2secret") {
				t.Errorf("error shows the password: %v", err)
			}
			if !strings.Contains(err.Error(), "mqb:xxxxx@127.0.0.1:1") {
				t.Errorf("error %v, want it to name the redacted url", err)
			}
		})
	}
}

// TestMongoSinkServerDown: an insert while the server is down (killed) fails the
// batch as retryable (nothing is known per record); once it is back the
// same records go in, and what had landed is absorbed.
func TestMongoSinkServerDown(t *testing.T) {
	srv := testsrv.NewMongoDB(t)
	c, err := mongo.Connect(options.Client().ApplyURI(srv.DSN() + "/?serverSelectionTimeoutMS=500"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	s := &mongoSink{route: "down", url: srv.DSN(), client: c, coll: c.Database("shop").Collection("orders"), idField: "id", outcome: true}
	recs := func(ids ...string) []*runtime.Record {
		var out []*runtime.Record
		for _, id := range ids {
			out = append(out, &runtime.Record{Payload: []byte(`{"id":"` + id + `"}`)})
		}
		return out
	}
	ctx := context.Background()
	if err := s.Write(ctx, recs("a")); err != nil {
		t.Fatal(err)
	}
	srv.Kill(t)
	err = s.Write(ctx, recs("a", "b"))
	if err == nil || !runtime.IsRetryable(err) {
		t.Fatalf("write to a stopped server: %v, want a retryable error", err)
	}
	srv.Start(t)
	rs := recs("a", "b")
	if err := s.Write(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if rs[0].Meta[metaMongoOutcome] != "existed" || rs[1].Meta[metaMongoOutcome] != "inserted" {
		t.Errorf("outcomes %v %v, want existed inserted", rs[0].Meta, rs[1].Meta)
	}
}

// TestMongoSinkOtherUniqueIndex: a duplicate key on a unique index other
// than _id is not the record being stored already: it fails the record
// alone, while a repeat of a stored _id is existed. FerretDB names no index
// in the error, so the sink asks the collection which _ids it holds.
func TestMongoSinkOtherUniqueIndex(t *testing.T) {
	db, mdb := mongoDB(t)
	ctx := context.Background()
	coll := mdb.Collection("users")
	if _, err := coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "email", Value: 1}},
		Options: options.Index().SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	c := coll.Database().Client()
	s := &mongoSink{route: "users", url: db.DSN, client: c, coll: coll, idField: "id", outcome: true}
	payloads := func(ps ...string) []*runtime.Record {
		var out []*runtime.Record
		for _, p := range ps {
			out = append(out, &runtime.Record{Payload: []byte(p)})
		}
		return out
	}
	if err := s.Write(ctx, payloads(`{"id":1,"email":"a@x"}`, `{"id":2,"email":"b@x"}`)); err != nil {
		t.Fatal(err)
	}
	rs := payloads(`{"id":1,"email":"a@x"}`, `{"id":3,"email":"b@x"}`, `{"id":4,"email":"c@x"}`, `{"id":2.0,"email":"b@x"}`)
	if err := s.Write(ctx, rs); err != nil {
		t.Fatal(err)
	}
	want := []struct{ outcome, err string }{
		{"existed", ""},
		{"", "other than _id"},
		{"inserted", ""},
		{"existed", ""}, // 2.0 is the _id 2: the index compares numbers by value
	}
	for i, w := range want {
		r := rs[i]
		if r.Meta[metaMongoOutcome] != w.outcome || (w.err == "") != (r.Refused() == "") || !strings.Contains(r.Refused(), w.err) {
			t.Errorf("record %d (%s): outcome %q error %q, want %q %q", i, r.Payload, r.Meta[metaMongoOutcome], r.Refused(), w.outcome, w.err)
		}
	}
	if n := len(mongoDocs(t, coll)); n != 3 {
		t.Errorf("%d documents, want 3", n)
	}
}

// TestMongoSinkConfigErrors: what the sink does not do is refused at
// start-up, naming the attribute, before any connection. (format = text
// is refused earlier, at build: E026.)
func TestMongoSinkConfigErrors(t *testing.T) {
	for _, tc := range []struct{ attrs, want string }{
		{`request_reply = true`, `attribute request_reply: not supported by the mongodb sink yet`},
		{`id_field = ""`, `attribute id_field: empty`},
	} {
		t.Run(tc.attrs, func(t *testing.T) {
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"id":"a"}`)
			src := fmt.Sprintf(`
route bad {
  from file { path = "in.jsonl" }
  to mongodb {
    url        = "mongodb://127.0.0.1:1"
    database   = "shop"
    collection = "orders"
    %s
  }
}
`, tc.attrs)
			opts := runtest.Options()
			opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
			_, err := runtime.Run(context.Background(), plantest.Compile(t, src), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestMongoSinkOutage: file → collection keyed by id_field while the
// server is killed and started again two seconds later on its data.
// With a retry step the route rides through; without one it stops with
// an error naming the sink, and a rerun from the committed position
// writes the rest. Either way the unique _id absorbs what is written
// twice: the collection ends with each order exactly once.
func TestMongoSinkOutage(t *testing.T) {
	for _, tc := range runtest.SinkOutageCases(runtest.Stops) {
		t.Run(tc.Name, func(t *testing.T) {
			retry := ""
			if tc.Retry {
				retry = "retry { attempts = 300, backoff = 100ms, max_backoff = 1s }"
			}
			srv := testsrv.NewMongoDB(t)
			db := srv.NewDatabase(t)
			c, err := mongo.Connect(options.Client().ApplyURI(db.DSN))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Disconnect(context.Background()) })
			coll := c.Database(db.Name).Collection("orders")
			dir := t.TempDir()
			const n = 20000
			plantest.WriteOrders(t, filepath.Join(dir, "in.jsonl"), n)
			p := plantest.Compile(t, fmt.Sprintf(`route orders_to_mongo {
  guarantee effectively_once
  batch_size = 64
  from file { path = "in.jsonl" }
  %s
  to mongodb {
    url        = %q
    database   = %q
    collection = "orders"
    id_field   = "order_id"
  }
}
`, retry, db.DSN, db.Name))
			opts := runtest.Options()
			opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
			stored := func() int64 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				n, _ := coll.CountDocuments(ctx, bson.D{}) // 0 while the server is down
				return n
			}
			rs := runtest.Outage{
				Plan: p, Route: "orders_to_mongo", Options: &opts,
				Underway: func() bool { return stored() > 0 },
				Outage:   func() { srv.Kill(t); time.Sleep(2 * time.Second); srv.Start(t) },
				Expect:   tc.Expect,
				StopSays: []string{"route orders_to_mongo", "mongodb insert into"},
			}.Run(t)
			docs := mongoDocs(t, coll)
			t.Logf("%d documents; %+v", len(docs), rs)
			for i := range n {
				if _, ok := docs[fmt.Sprintf("o-%d", i)]; !ok {
					t.Fatalf("order o-%d is not in the collection (%d of %d are)", i, len(docs), n)
				}
			}
			if len(docs) != n {
				t.Errorf("collection holds %d documents, want %d", len(docs), n)
			}
		})
	}
}
