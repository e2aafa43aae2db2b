package mongodb

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// benchDocs is how many documents the MongoDB benchmarks move, in
// batches of benchBatch.
const benchDocs, benchBatch = 20000, 1024

// benchDB is a fresh database on the shared server (FerretDB) and a
// client on it.
func benchDB(b *testing.B) (testsrv.Database, *mongo.Database) {
	b.Helper()
	db := testsrv.MongoDB(b)
	c, err := mongo.Connect(options.Client().ApplyURI(db.DSN))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Disconnect(context.Background()) })
	return db, c.Database(db.Name)
}

// BenchmarkMongoDBSink: file → mongodb keyed by id_field (a repeat hits
// the unique _id index), a fresh collection per run.
func BenchmarkMongoDBSink(b *testing.B) {
	db, _ := benchDB(b)
	input, size := plantest.BenchInput(b, benchDocs)
	b.SetBytes(size)
	for i := range b.N {
		b.StopTimer()
		e := plantest.NewEnv(b)
		p := plantest.Compile(b, fmt.Sprintf(`route m {
  batch_size = %d
  from file { path = %q, checkpoint_store = %q }
  to mongodb { url = %q, database = %q, collection = "sink%d", id_field = "order_id" }
}
`, benchBatch, input, "pebble://"+e.State, db.DSN, db.Name, i))
		b.StartTimer()
		st := runtest.RunRoute(b, context.Background(), p, runtest.Options(), "m")
		if st.Out != benchDocs {
			b.Fatalf("%+v, want %d out", st, benchDocs)
		}
	}
	b.ReportMetric(float64(benchDocs)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkMongoDriverInsertBaseline is the baseline of
// BenchmarkMongoDBSink: a plain mongo-driver loop reads the same file and
// inserts it unordered in batches of benchBatch, order_id as _id; no
// checkpoint, no per-record outcome.
func BenchmarkMongoDriverInsertBaseline(b *testing.B) {
	_, mdb := benchDB(b)
	input, size := plantest.BenchInput(b, benchDocs)
	ctx := context.Background()
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		coll := mdb.Collection(fmt.Sprintf("plain%d", i))
		f, err := os.Open(input)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		docs := make([]any, 0, benchBatch)
		n := 0
		flush := func() {
			if _, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
				b.Fatal(err)
			}
			n += len(docs)
			docs = docs[:0]
		}
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				b.Fatal(err)
			}
			doc := bson.D{{Key: "_id", Value: m["order_id"]}}
			for k, v := range m {
				doc = append(doc, bson.E{Key: k, Value: v})
			}
			if docs = append(docs, doc); len(docs) == benchBatch {
				flush()
			}
		}
		if len(docs) > 0 {
			flush()
		}
		f.Close()
		if n != benchDocs {
			b.Fatalf("%d documents, want %d", n, benchDocs)
		}
	}
	b.ReportMetric(float64(benchDocs)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// benchCollection fills collection src of mdb with benchDocs documents,
// _id 0, 1, 2…
func benchCollection(b *testing.B, mdb *mongo.Database) {
	b.Helper()
	coll := mdb.Collection("src")
	docs := make([]any, 0, benchBatch)
	for i := range benchDocs {
		docs = append(docs, bson.D{{Key: "_id", Value: i}, {Key: "order_id", Value: fmt.Sprintf("o-%d", i)}, {Key: "amount", Value: i},
			{Key: "body", Value: fmt.Sprintf("order number %d with some padding text", i)}})
		if len(docs) == benchBatch || i == benchDocs-1 {
			if _, err := coll.InsertMany(context.Background(), docs); err != nil {
				b.Fatal(err)
			}
			docs = docs[:0]
		}
	}
}

// BenchmarkMongoDBCapture: the mongodb capture source (capture_all) reads
// the collection into a file, a fresh checkpoint per run; timed until the
// file holds every document (the source polls on after that).
func BenchmarkMongoDBCapture(b *testing.B) {
	db, mdb := benchDB(b)
	benchCollection(b, mdb)
	for range b.N {
		b.StopTimer()
		e := plantest.NewEnv(b)
		out := filepath.Join(e.Dir, "out.jsonl")
		p := plantest.Compile(b, fmt.Sprintf(`route m {
  batch_size = %d
  from mongodb { url = %q, database = %q, collection = "src", checkpoint_store = %q }
  to file { path = %q }
}
`, benchBatch, db.DSN, db.Name, "pebble://"+e.State, out))
		b.StartTimer()
		r := runtest.Start(context.Background(), p, runtest.Options())
		if !runtest.WaitFor(func() bool { return plantest.CountLines(out) >= benchDocs }, 5*time.Minute, 20*time.Millisecond) {
			b.Fatalf("%d lines, want %d", plantest.CountLines(out), benchDocs)
		}
		b.StopTimer()
		r.Stop(b)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchDocs)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkMongoDriverFindBaseline is the baseline of
// BenchmarkMongoDBCapture: a plain mongo-driver loop finds every document
// in _id order and writes each as relaxed extended JSON to a file, synced
// at the end.
func BenchmarkMongoDriverFindBaseline(b *testing.B) {
	_, mdb := benchDB(b)
	benchCollection(b, mdb)
	ctx := context.Background()
	out := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		f, err := os.Create(filepath.Join(out, fmt.Sprintf("out%d.jsonl", i)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		cur, err := mdb.Collection("src").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(benchBatch))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for cur.Next(ctx) {
			line, err := bson.MarshalExtJSON(cur.Current, false, false)
			if err != nil {
				b.Fatal(err)
			}
			w.Write(line)
			w.WriteByte('\n')
			n++
		}
		if err := cur.Err(); err != nil {
			b.Fatal(err)
		}
		cur.Close(ctx)
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if n != benchDocs {
			b.Fatalf("%d documents, want %d", n, benchDocs)
		}
	}
	b.ReportMetric(float64(benchDocs)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkMongoDriverPagedBaseline is the second baseline of
// BenchmarkMongoDBCapture: the same plain loop, paging as the capture
// source does (a find of _id greater than the last one read, sorted by
// _id, limited to benchBatch, until a page comes back short), so the
// server's cost of a page is the same in both.
func BenchmarkMongoDriverPagedBaseline(b *testing.B) {
	_, mdb := benchDB(b)
	benchCollection(b, mdb)
	ctx := context.Background()
	out := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		f, err := os.Create(filepath.Join(out, fmt.Sprintf("out%d.jsonl", i)))
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriter(f)
		n := 0
		filter := bson.D{}
		for {
			cur, err := mdb.Collection("src").Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(benchBatch))
			if err != nil {
				b.Fatal(err)
			}
			page := 0
			var last bson.RawValue
			for cur.Next(ctx) {
				line, err := bson.MarshalExtJSON(cur.Current, false, false)
				if err != nil {
					b.Fatal(err)
				}
				w.Write(line)
				w.WriteByte('\n')
				last = cur.Current.Lookup("_id")
				page++
			}
			if err := cur.Err(); err != nil {
				b.Fatal(err)
			}
			cur.Close(ctx)
			n += page
			if page < benchBatch {
				break
			}
			filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: last}}}}
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if n != benchDocs {
			b.Fatalf("%d documents, want %d", n, benchDocs)
		}
	}
	b.ReportMetric(float64(benchDocs)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
