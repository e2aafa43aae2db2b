package mongodb

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// captureSrc is a capture route from collection docs into SQLite, keyed
// on message_id (the database, the collection and the _id), with every
// path absolute so the crash helper can run it: URL, database, consume,
// SQLite file, checkpoint directory.
const captureSrc = `
route capture {
  guarantee effectively_once
  batch_size = 10
  from mongodb {
    url              = "%s"
    database         = "%s"
    collection       = "docs"
    consume          = %s
    poll_interval    = 50ms
    checkpoint_store = "pebble://%s"
  }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, n INTEGER NOT NULL)"
    insert_query = "INSERT INTO docs (id, n) VALUES (${message_id}, ${payload.n}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// captureEnv is one capture route's files.
type captureEnv struct {
	dir, db, state string
	plan           plan.Plan
}

func newCapture(t *testing.T, db testsrv.Database, consume string) captureEnv {
	t.Helper()
	dir := t.TempDir()
	e := captureEnv{dir: dir, db: filepath.Join(dir, "docs.db"), state: filepath.Join(dir, "state")}
	e.plan = plantest.Compile(t, fmt.Sprintf(captureSrc, db.DSN, db.Name, consume, e.state, e.db))
	return e
}

func (e captureEnv) options() runtime.Options {
	opts := runtest.Options()
	opts.BaseDir = e.dir
	opts.StateDir = e.state
	return opts
}

// rows is what the SQLite sink holds: n by message_id.
func (e captureEnv) rows(t testing.TB) map[string]int64 {
	t.Helper()
	if e.count(t) < 0 {
		return nil
	}
	return runtest.SQLiteMap[int64](t, e.db, `SELECT id, n FROM docs`)
}

// count is the number of rows the sink holds (-1 before the table exists).
func (e captureEnv) count(t testing.TB) int {
	t.Helper()
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+e.db+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow(`SELECT count(*) FROM docs`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// run runs the route in-process until stop returns, then drains it; it
// returns the run's error and the route's stats.
func (e captureEnv) run(stop func() bool) (runtime.RouteStats, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		st  runtime.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := runtime.Run(ctx, e.plan, e.options())
		done <- result{st, err}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case r := <-done:
			return r.st.Route("capture"), r.err
		case <-deadline:
			cancel()
			r := <-done
			return r.st.Route("capture"), fmt.Errorf("not done within 2 minutes (last error %v)", r.err)
		case <-tick.C:
			if stop() {
				cancel()
				r := <-done
				return r.st.Route("capture"), r.err
			}
		}
	}
}

// runUntil runs the route in-process until the sink holds want rows.
func (e captureEnv) runUntil(t *testing.T, want int) runtime.RouteStats {
	t.Helper()
	st := runtest.RunUntil(t, e.plan, e.options(), 2*time.Minute, func() bool { return e.count(t) >= want })
	rs := st.Route("capture")
	runtest.CheckCounts(t, rs)
	return rs
}

// insertDocs inserts documents {n: from} … {n: to-1}, _ids minted by the
// driver (ObjectIds of one client: increasing).
func insertDocs(t testing.TB, coll *mongo.Collection, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for lo := from; lo < to; lo += 500 {
		var docs []any
		for n := lo; n < min(lo+500, to); n++ {
			docs = append(docs, bson.D{{Key: "n", Value: n}})
		}
		if _, err := coll.InsertMany(ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
}

// checkNs asserts the sink holds exactly the documents from … to-1.
func checkNs(t testing.TB, rows map[string]int64, from, to int) {
	t.Helper()
	seen := map[int64]int{}
	for _, n := range rows {
		seen[n]++
	}
	for n := from; n < to; n++ {
		if seen[int64(n)] != 1 {
			t.Errorf("document n=%d is in the sink %d times", n, seen[int64(n)])
		}
	}
	if len(rows) != to-from {
		t.Errorf("the sink holds %d rows, want %d", len(rows), to-from)
	}
}

// TestMongoSourceCapture: capture_all reads the documents there and then
// those inserted while it runs, and a second run resumes after the last
// committed one (reading nothing again); capture_new reads only documents
// inserted after its first start, and keeps that start across a restart
// that comes before any document.
func TestMongoSourceCapture(t *testing.T) {
	db, mdb := mongoDB(t)
	tests := []struct {
		consume string
		from    int // the first document the sink must hold
	}{
		{"capture_all", 0},
		{"capture_new", 100},
	}
	for _, tc := range tests {
		t.Run(tc.consume, func(t *testing.T) {
			coll := mdb.Collection("docs")
			if err := coll.Drop(context.Background()); err != nil {
				t.Fatal(err)
			}
			insertDocs(t, coll, 0, 100)
			e := newCapture(t, db, tc.consume)
			if tc.consume == "capture_new" {
				// The first run commits its start, reads nothing and stops.
				began := time.Now()
				rs, err := e.run(func() bool { return time.Since(began) > time.Second })
				if err != nil || rs.Out != 0 || rs.Deduplicated != 1 {
					t.Fatalf("first capture_new run: %+v, %v; want the start mark alone", rs, err)
				}
			}
			insertDocs(t, coll, 100, 150)
			rs := e.runUntil(t, 150-tc.from)
			checkNs(t, e.rows(t), tc.from, 150)
			if rs.Out != int64(150-tc.from) {
				t.Errorf("run wrote %d, want %d", rs.Out, 150-tc.from)
			}
			// A second run resumes after the last committed document.
			insertDocs(t, coll, 150, 160)
			rs = e.runUntil(t, 160-tc.from)
			checkNs(t, e.rows(t), tc.from, 160)
			if rs.Out != 10 {
				t.Errorf("resumed run wrote %d, want the 10 new documents", rs.Out)
			}
		})
	}
}

// TestMongoSourcePremise: a document inserted behind the cursor, or with
// an _id of another type, stops the route with an error naming what
// happened, never a silent skip; so does one inserted behind the
// committed cursor while the route was stopped.
func TestMongoSourcePremise(t *testing.T) {
	db, mdb := mongoDB(t)
	tests := []struct {
		name    string
		late    any // the _id inserted once the route has read 2, 4 … 20
		stopped bool
		want    string
	}{
		{"behind the cursor", 7, false, "inserted with an _id at or below 20"},
		{"another type", "a-1", false, "cannot reach"},
		{"behind while stopped", 9, true, "appeared while the route was stopped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			coll := mdb.Collection("docs")
			if err := coll.Drop(ctx); err != nil {
				t.Fatal(err)
			}
			var docs []any
			for n := 2; n <= 20; n += 2 {
				docs = append(docs, bson.D{{Key: "_id", Value: n}, {Key: "n", Value: n}})
			}
			if _, err := coll.InsertMany(ctx, docs); err != nil {
				t.Fatal(err)
			}
			e := newCapture(t, db, "capture_all")
			late := func() {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: tc.late}, {Key: "n", Value: 1000}}); err != nil {
					t.Error(err)
				}
			}
			if tc.stopped {
				e.runUntil(t, 10)
				late()
				_, err := runtime.Run(ctx, e.plan, e.options())
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "increasing_id") {
					t.Fatalf("run after an insert behind the checkpoint: %v, want an error saying %q and naming the premise", err, tc.want)
				}
				return
			}
			lateDone := false
			_, err := e.run(func() bool {
				if !lateDone && e.count(t) >= 10 {
					late()
					lateDone = true
				}
				return false
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "increasing_id") {
				t.Fatalf("route ended with %v, want an error saying %q and naming the premise", err, tc.want)
			}
			if got := e.rows(t); len(got) != 10 {
				t.Errorf("sink holds %d rows, want the 10 documents read before", len(got))
			}
		})
	}
}

// TestMongoSourceStreamingInserts: documents inserted one at a time
// while the source keeps catching up are all read, and none is taken for
// one the cursor cannot reach: the premise check runs on every catch-up,
// so it must never mistake a document that is there to be read for one
// out of reach.
func TestMongoSourceStreamingInserts(t *testing.T) {
	db, mdb := mongoDB(t)
	ctx := context.Background()
	coll := mdb.Collection("docs")
	if err := coll.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	insertDocs(t, coll, 0, 1)
	const total = 400
	e := newCapture(t, db, "capture_all")
	inserted := make(chan error, 1)
	go func() {
		for n := 1; n < total; n++ {
			if _, err := coll.InsertOne(ctx, bson.D{{Key: "n", Value: n}}); err != nil {
				inserted <- err
				return
			}
		}
		inserted <- nil
	}()
	var insertErr error
	insertDone := false
	_, err := e.run(func() bool {
		if !insertDone {
			select {
			case insertErr = <-inserted:
				insertDone = true
			default:
			}
		}
		return insertDone && e.count(t) >= total
	})
	if !insertDone {
		insertErr = <-inserted
	}
	if insertErr != nil {
		t.Fatal(insertErr)
	}
	if err != nil {
		t.Fatalf("route ended with %v while documents streamed in", err)
	}
	checkNs(t, e.rows(t), 0, total)
}

// TestCrashMongoSource: the process is SIGKILLed twice while it reads
// the collection (the snapshot) and twice while documents keep coming
// (the stream); a last run catches up, and the sink holds exactly what a
// clean run of the same route writes, every document once.
func TestCrashMongoSource(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	began := time.Now()
	db, mdb := mongoDB(t)
	coll := mdb.Collection("docs")
	const snapshot, streamed, total = 3000, 4400, 4500
	insertDocs(t, coll, 0, snapshot)
	e := newCapture(t, db, "capture_all")
	planPath := plantest.WriteCrashPlan(t, e.plan, e.dir)
	// killAt runs the route in the crash helper and SIGKILLs it once the
	// sink holds rows rows.
	killAt := func(rows int) {
		t.Helper()
		r := plantest.StartHelper(t, bin, planPath)
		if !runtest.WaitFor(func() bool { return e.count(t) >= rows }, 2*time.Minute, 5*time.Millisecond) {
			r.Cmd.Process.Kill()
			<-r.Exited
			t.Fatalf("the run did not reach %d rows: %d\n%s", rows, e.count(t), r.Stderr.String())
		}
		r.Cmd.Process.Signal(syscall.SIGKILL)
		<-r.Exited
		t.Logf("killed at %d rows (wanted %d), %v in", e.count(t), rows, time.Since(began).Round(time.Millisecond))
	}
	killAt(600)
	killAt(1800)
	if n := e.count(t); n >= snapshot {
		t.Fatalf("the snapshot kills came after the snapshot (%d rows)", n)
	}
	stream := make(chan struct{})
	go func() {
		defer close(stream)
		for n := snapshot; n < streamed; n += 50 {
			insertDocs(t, coll, n, n+50)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	killAt(snapshot + 300)
	killAt(snapshot + 900)
	<-stream
	// The last documents come once the final run is up, so it is
	// running (and drains on SIGTERM) when the sink holds them all.
	final := plantest.StartHelper(t, bin, planPath)
	insertDocs(t, coll, streamed, total)
	if !runtest.WaitFor(func() bool { return e.count(t) >= total }, 2*time.Minute, 50*time.Millisecond) {
		final.Cmd.Process.Kill()
		<-final.Exited
		t.Fatalf("final run did not catch up: %d rows\n%s", e.count(t), final.Stderr.String())
	}
	time.Sleep(200 * time.Millisecond)
	var st runtime.Stats
	final.Stop(t, &st)
	runtest.CheckCounts(t, st.Route("capture"))
	t.Logf("final run: %+v, %v in", st.Route("capture"), time.Since(began).Round(time.Millisecond))
	got := e.rows(t)
	checkNs(t, got, 0, total)

	clean := newCapture(t, db, "capture_all")
	clean.run(func() bool { return clean.count(t) >= total })
	want := clean.rows(t)
	t.Logf("clean run done %v in", time.Since(began).Round(time.Millisecond))
	if len(got) != len(want) {
		t.Fatalf("crashed runs wrote %d rows, a clean run %d", len(got), len(want))
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("row %s: crashed runs wrote %d, a clean run %d", id, got[id], n)
		}
	}
}

// TestMongoSourceOutage: the server is killed mid-capture and started
// again two seconds later on its data; documents inserted after the
// restart are captured too, and every document lands once: the source
// rides through on the driver's reconnect, or stops with an error
// naming the collection and a rerun resumes from its checkpoint.
func TestMongoSourceOutage(t *testing.T) {
	srv := testsrv.NewMongoDB(t)
	db := srv.NewDatabase(t)
	// docs is the collection on a client of its own: the connections of
	// one opened before the outage are dead after it.
	docs := func() *mongo.Collection {
		c, err := mongo.Connect(options.Client().ApplyURI(db.DSN))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Disconnect(context.Background()) })
		return c.Database(db.Name).Collection("docs")
	}
	const before, total = 3000, 3500
	insertDocs(t, docs(), 0, before)
	e := newCapture(t, db, "capture_all")
	opts := e.options()
	rs := runtest.Outage{
		Plan: e.plan, Route: "capture", Options: &opts,
		Underway: func() bool { return e.count(t) > 0 },
		Outage: func() {
			srv.Kill(t)
			t.Logf("server killed with %d rows written", e.count(t))
			time.Sleep(2 * time.Second)
			srv.Start(t)
			insertDocs(t, docs(), before, total)
		},
		Done:     func() bool { return e.count(t) >= total },
		Expect:   runtest.RidesThroughOrStops,
		StopSays: []string{"route capture", "mongodb source"},
	}.Run(t)
	t.Logf("%+v", rs)
	checkNs(t, e.rows(t), 0, total)
}
