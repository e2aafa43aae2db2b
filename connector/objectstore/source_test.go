package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// putObjects writes ds's lines under url as objects of per lines each,
// rotating plain, gzip and zstd, named so key order is line order. A blank
// line is slipped into some objects: it takes no record index; a
// byte-order mark starts some others.
func putObjects(t testing.TB, url string, ds plantest.Dataset, per int) int {
	t.Helper()
	st := openTestStore(t, url)
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	n := 0
	for i := 0; i < len(ds.Lines); i += per {
		var body bytes.Buffer
		if n%5 == 2 {
			// A byte-order mark starts some objects (inside the
			// compression, where there is one): not part of the line.
			body.WriteString("\xef\xbb\xbf")
		}
		for j, l := range ds.Lines[i:min(i+per, len(ds.Lines))] {
			if j == 3 && n%4 == 1 {
				body.WriteString("\n")
			}
			body.WriteString(l)
			body.WriteByte('\n')
		}
		name := fmt.Sprintf("obj-%05d.jsonl", n)
		data := body.Bytes()
		switch n % 3 {
		case 1:
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			w.Write(data)
			w.Close()
			name, data = name+".gz", gz.Bytes()
		case 2:
			name, data = name+".zst", zw.EncodeAll(data, nil)
		}
		if _, err := st.PutIfAbsent(context.Background(), name, data, "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// objectSourcePlan is object_store (url) → dlq → SQLite, ON CONFLICT on the
// payload's order_id: duplicates in the objects land once.
func objectSourcePlan(e plantest.Env, url string, batch, concurrency int) plan.Plan {
	p := objectSourcePlanOf(e, url, batch, concurrency)
	for k, v := range s3TestAttrs(url) {
		p.Routes[0].Nodes[0].Attrs[k] = v
	}
	return p
}

func objectSourcePlanOf(e plantest.Env, url string, batch, concurrency int) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "object_store", Side: plan.SideInput, Attrs: map[string]plan.Value{
			"url": plantest.Tmpl(plantest.Lit(url)), "format": plantest.Enum("json"),
			"checkpoint_store": plantest.Str("pebble://" + e.State), "max_record_bytes": plantest.Int(plantest.MaxRecordBytes)}},
		plantest.DLQFile("n1", e.DLQ, "write_time"),
		{ID: "n2", Role: plan.RoleSink, Kind: "sql", Side: plan.SideOutput, Attrs: map[string]plan.Value{
			"url":          plantest.Tmpl(plantest.Lit("sqlite://" + e.DB)),
			"create_table": plantest.Str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY NOT NULL, amount INTEGER NOT NULL, body TEXT)`),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO orders (id, amount, body) VALUES ("), plantest.Ex(`payload.order_id`),
				plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(", "), plantest.Ex("payload.body"), plantest.Lit(") ON CONFLICT (id) DO NOTHING")),
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "lake", Guarantee: plan.EffectivelyOnce, Concurrency: concurrency, BatchSize: batch,
		Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

// objectSourceURLs are a GCS emulator prefix, a local directory and an S3
// emulator prefix.
func objectSourceURLs(t *testing.T) []string {
	srv := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost())
	startS3(t)
	return []string{"gs://lake/in", "file://" + filepath.Join(t.TempDir(), "bucket", "in"), "s3://lake/in"}
}

func TestObjectStoreSourceToSQLite(t *testing.T) {
	for i, url := range objectSourceURLs(t) {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			e := plantest.NewEnv(t)
			ds := plantest.GenDataset(t, e.Input, 20000, uint64(40+i))
			objects := putObjects(t, url, ds, 1500)
			rs := runRoute(t, objectSourcePlan(e, url, 512, 2), "lake")
			if rs.In != int64(ds.Records) || rs.Committed != int64(ds.Records) {
				t.Errorf("in %d committed %d, want %d (%d objects)", rs.In, rs.Committed, ds.Records, objects)
			}
			if rs.DeadLettered != int64(len(ds.Bad)) {
				t.Errorf("dead-lettered %d, want %d", rs.DeadLettered, len(ds.Bad))
			}
			runtest.CheckSQLite(t, e.DB, ds)
			// Positions are record indexes across the listing: the DLQ
			// names each bad line by its index in the dataset.
			plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), ds.Bad, true)

			// Nothing new: a second run resumes after the last object.
			if rs := runRoute(t, objectSourcePlan(e, url, 512, 2), "lake"); rs.In != 0 {
				t.Errorf("rerun read %d records, want 0", rs.In)
			}
			// An object added after the last one is read by the next run.
			extra := `{"order_id": "late-1", "amount": 7, "body": "late"}` + "\n"
			if _, err := openTestStore(t, url).PutIfAbsent(context.Background(), "zz-late.jsonl", []byte(extra), ""); err != nil {
				t.Fatal(err)
			}
			if rs := runRoute(t, objectSourcePlan(e, url, 512, 2), "lake"); rs.In != 1 || rs.Out != 1 {
				t.Errorf("run after a new object: %+v, want in 1 out 1", rs)
			}
		})
	}
}

// TestObjectStoreSourceResume cancels a run part-way and resumes: the second
// run reads only what the first did not commit (no object re-read from its
// start, none before the checkpoint's), and every id lands once.
func TestObjectStoreSourceResume(t *testing.T) {
	for i, url := range objectSourceURLs(t) {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) {
			e := plantest.NewEnv(t)
			const n = 60000
			ds := plantest.GenDataset(t, e.Input, n, uint64(50+i))
			putObjects(t, url, ds, 7000)
			first := runtest.RunCancelled(t, objectSourcePlan(e, url, 256, 2), "lake", 30*time.Millisecond)
			if first.Committed >= n || first.Committed == 0 {
				t.Logf("first run committed %d of %d: the resume is not mid-listing", first.Committed, n)
			}
			second := runRoute(t, objectSourcePlan(e, url, 512, 1), "lake")
			if first.Committed+second.In != n {
				t.Errorf("first run committed %d, second read %d: want %d in all", first.Committed, second.In, n)
			}
			if second.Committed != n {
				t.Errorf("second run committed %d, want %d", second.Committed, n)
			}
			runtest.CheckSQLite(t, e.DB, ds)
			plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), ds.Bad, true)
			t.Logf("first run %+v, second run %+v", first, second)
		})
	}
}

// TestCrashObjectStoreSourceExactlyOnce SIGKILLs an object_store → SQLite
// route (GCS emulator, then file://) at random moments and lets it finish:
// every id once, every bad line in the DLQ.
func TestCrashObjectStoreSourceExactlyOnce(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	srv := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost()) // inherited by the helper
	startS3(t)
	for i, url := range []string{"gs://lake/crash", "file://" + filepath.Join(t.TempDir(), "bucket", "crash"), "s3://lake/crash"} {
		seed := uint64(61 + i)
		e := plantest.NewEnv(t)
		ds := plantest.GenDataset(t, e.Input, 100000, seed)
		putObjects(t, url, ds, 9000)
		st := runtest.CrashAndFinish(t, bin, objectSourcePlan(e, url, 700, 2), e.Dir, seed, 4)
		rs := st.Route("lake")
		runtest.CheckCounts(t, rs)
		t.Logf("%s: final run %+v", url, rs)
		runtest.CheckSQLite(t, e.DB, ds)
		plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), ds.Bad, false)
	}
}

// BenchmarkObjectStoreSourceGCS: object_store source on the GCS emulator
// (the input cut into 10 objects, zstd every third) → file (write_time),
// with a fresh checkpoint per run.
func BenchmarkObjectStoreSourceGCS(b *testing.B) {
	const n = 100000
	srv := testsrv.NewGCS(b, "lake")
	b.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost())
	input, size := plantest.BenchInput(b, n)
	data, err := os.ReadFile(input)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	putObjects(b, "gs://lake/src", plantest.Dataset{Lines: lines}, n/10)
	out := b.TempDir()
	runtest.Bench(b, n, size, func(i int, state string) plan.Plan {
		nodes := []plan.Node{
			{ID: "n0", Role: plan.RoleSource, Kind: "object_store", Attrs: map[string]plan.Value{
				"url": plantest.Tmpl(plantest.Lit("gs://lake/src")), "checkpoint_store": plantest.Str("pebble://" + state)}},
			{ID: "n1", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
				"path": plantest.Str(filepath.Join(out, fmt.Sprintf("out%d.jsonl", i))), "name_by": plantest.Enum("write_time")}},
		}
		return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "read", Concurrency: 1, BatchSize: 1024,
			Nodes: nodes, Edges: plantest.Chain(nodes)}}}
	})
}

// flakyReadStore cuts the first read of every object after cut bytes.
type flakyReadStore struct {
	objectStore
	cut   int
	mu    sync.Mutex
	cuts  map[string]bool
	count atomic.Int64
}

func (s *flakyReadStore) open(ctx context.Context, name string) (io.ReadCloser, error) {
	body, err := s.objectStore.(objectReader).open(ctx, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cuts[name] {
		return body, nil
	}
	s.cuts[name] = true
	s.count.Add(1)
	return &cutReader{ReadCloser: body, left: s.cut}, nil
}

type cutReader struct {
	io.ReadCloser
	left int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, errors.New("connection reset (injected)")
	}
	if len(p) > r.left {
		p = p[:r.left]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= n
	return n, err
}

// TestObjectStoreSourceReadFailsHalfway: every object's first read breaks
// part-way (plain, gzip and zstd alike); the source reopens it and passes
// over the lines it had read, so the run reads each record once.
func TestObjectStoreSourceReadFailsHalfway(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "bucket")
	e := plantest.NewEnv(t)
	const n = 20000
	ds := plantest.GenDataset(t, e.Input, n, 71)
	objects := putObjects(t, url, ds, 3000)
	flaky := &flakyReadStore{cut: 10000, cuts: map[string]bool{}}
	objectStoreHook = func(s objectStore) objectStore { flaky.objectStore = s; return flaky }
	defer func() { objectStoreHook = nil }()
	rs := runRoute(t, objectSourcePlan(e, url, 512, 2), "lake")
	if rs.In != n || rs.Committed != n {
		t.Errorf("%+v: want in and committed %d", rs, n)
	}
	if got := flaky.count.Load(); got != int64(objects) {
		t.Errorf("%d reads cut, want one per object (%d)", got, objects)
	}
	runtest.CheckSQLite(t, e.DB, ds)
	plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), ds.Bad, true)
}

// TestObjectStoreSourceGCSOutage stops the GCS emulator for half a second
// mid-run: the source retries, reopening the object it was reading, and the
// run ends with every record read once.
func TestObjectStoreSourceGCSOutage(t *testing.T) {
	srv := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost())
	url := "gs://lake/outage"
	e := plantest.NewEnv(t)
	const n = 60000
	ds := plantest.GenDataset(t, e.Input, n, 72)
	putObjects(t, url, ds, 2000)
	opts := runtest.Options()
	runtest.OnFirstProgress(&opts, 20*time.Millisecond, func(progress string) {
		t.Logf("stopping the emulator: %s", progress)
		srv.Restart(t, 500*time.Millisecond)
	})
	st, err := runtime.Run(context.Background(), objectSourcePlan(e, url, 128, 1), opts)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route("lake")
	runtest.CheckCounts(t, rs)
	if rs.In != n || rs.Committed != n {
		t.Errorf("%+v: want in and committed %d", rs, n)
	}
	runtest.CheckSQLite(t, e.DB, ds)
	plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), ds.Bad, true)
	t.Logf("%+v", rs)
}

// TestObjectStoreSourceFromMQB compiles an object_store source the way
// mqbc run does (checkpoint_store and max_record_bytes declared in stdlib)
// and runs it twice: the second run reads nothing.
func TestObjectStoreSourceFromMQB(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bucket"), 0o700); err != nil {
		t.Fatal(err)
	}
	plantest.WriteLines(t, filepath.Join(dir, "bucket", "a.jsonl"), `{"id":"a1"}`, `{"id":"a2"}`, `{"id":"a1"}`)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(`{"id":"b1"}` + "\n" + `{"id":"` + strings.Repeat("x", 300) + `"}` + "\n"))
	w.Close()
	if err := os.WriteFile(filepath.Join(dir, "bucket", "b.jsonl.gz"), gz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	p := plantest.Compile(t, `
route lake {
  guarantee effectively_once
  from object_store {
    url              = "file://bucket"
    checkpoint_store = "pebble://cp"
    max_record_bytes = 200
  }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://lake.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY)"
    insert_query = "INSERT INTO t (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING"
  }
}
`)
	st := runtest.RunIn(t, dir, p).Route("lake")
	if st.In != 5 || st.Out != 4 || st.DeadLettered != 1 {
		t.Errorf("first run %+v, want in 5, out 4, the long line dead-lettered", st)
	}
	plantest.SameIDs(t, "table", plantest.SQLiteIDs(t, filepath.Join(dir, "lake.db"), "t"), []string{"a1", "a2", "b1"})
	if _, err := os.Stat(filepath.Join(dir, "cp")); err != nil {
		t.Errorf("checkpoint_store not used: %v", err)
	}
	if st := runtest.RunIn(t, dir, p).Route("lake"); st.In != 0 {
		t.Errorf("second run read %d records, want 0", st.In)
	}
}

// TestObjectStoreSourceFollow: with poll_interval the source keeps
// listing; objects added while it runs are read (one sorting before the
// last known key is not: the prefix must grow at its end), and a cancel
// drains and commits.
func TestObjectStoreSourceFollow(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "bucket")
	e := plantest.NewEnv(t)
	st := openTestStore(t, url)
	put := func(name string, ids ...string) {
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, `{"order_id":%q,"amount":1,"body":"x"}`+"\n", id)
		}
		if _, err := st.PutIfAbsent(context.Background(), name, []byte(b.String()), ""); err != nil {
			t.Fatal(err)
		}
	}
	put("0001.jsonl", "a", "b")
	p := objectSourcePlan(e, url, 64, 1)
	p.Routes[0].Nodes[0].Attrs["poll_interval"] = plan.Value{Type: plan.TDuration, Str: "20ms", Int: int64(20 * time.Millisecond)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := runtest.Start(ctx, p, runtest.Options())
	waitIDs := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			// The file exists a moment before create_table made the table.
			if plantest.TableExists(e.DB, "orders") {
				if got := plantest.SQLiteIDs(t, e.DB, "orders"); slices.Equal(got, want) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("table never held %v", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitIDs("a", "b")
	put("0002.jsonl", "c")
	put("0003.txt", "d")
	waitIDs("a", "b", "c", "d")
	put("0004.jsonl", "e")
	waitIDs("a", "b", "c", "d", "e")
	rs := r.Stop(t).Route("lake")
	runtest.CheckCounts(t, rs)
	if rs.In != 5 || rs.Committed != 5 {
		t.Errorf("%+v: want in and committed 5", rs)
	}
}

// TestObjectStoreSourceObjectAddedBehind: an object added under a key
// that sorts before one already read would never be read. Added while the
// route was down, it stops the next start before anything is read; added
// while the route follows the prefix, it stops the route. Deleting objects
// stops nothing.
func TestObjectStoreSourceObjectAddedBehind(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "bucket")
	dir := strings.TrimPrefix(url, "file://")
	e := plantest.NewEnv(t)
	st := openTestStore(t, url)
	put := func(name, id string) {
		line := fmt.Sprintf(`{"order_id":%q,"amount":1,"body":"x"}`+"\n", id)
		if _, err := st.PutIfAbsent(context.Background(), name, []byte(line), ""); err != nil {
			t.Fatal(err)
		}
	}
	put("0001.jsonl", "a")
	put("0003.jsonl", "c")
	p := objectSourcePlan(e, url, 64, 1)
	p.Routes[0].Premises = []plan.Premise{{Kind: plan.PremiseIncreasingID, When: plan.CheckPerRecord, Node: "n0",
		Target: url, Holds: "objects are added in key order", Reason: "source: read in key order"}}
	if rs := runRoute(t, p, "lake"); rs.Committed != 2 {
		t.Fatalf("first run: %+v, want 2 committed", rs)
	}
	run := func(p plan.Plan) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := runtime.Run(ctx, p, runtest.Options())
		if ctx.Err() != nil {
			return fmt.Errorf("the route ran for 20s without stopping (err %v)", err)
		}
		return err
	}
	want := func(err error, key string) {
		t.Helper()
		for _, w := range []string{"route lake", "1 object(s) were added under keys that sort at or before " + key, "would never be read", "premise increasing_id is broken (source: read in key order)"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error %v does not say %q", err, w)
			}
		}
	}
	// While the route is down: 0002 lands behind 0003, 0004 after it.
	put("0002.jsonl", "b")
	put("0004.jsonl", "d")
	want(run(p), `"0003.jsonl"`)
	if got := plantest.SQLiteIDs(t, e.DB, "orders"); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("rows %v after the refused start, want [a c]", got)
	}
	// 0002 and 0001 deleted: the route starts and reads 0004.
	for _, k := range []string{"0001.jsonl", "0002.jsonl"} {
		if err := os.Remove(filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	if rs := runRoute(t, p, "lake"); rs.In != 1 {
		t.Fatalf("run after the deletes: %+v, want the 1 new object", rs)
	}
	// While it follows the prefix: 0000 lands behind 0004 and stops it.
	p.Routes[0].Nodes[0].Attrs["poll_interval"] = plan.Value{Type: plan.TDuration, Str: "20ms", Int: int64(20 * time.Millisecond)}
	done := make(chan error, 1)
	go func() { done <- run(p) }()
	time.Sleep(300 * time.Millisecond)
	put("0000.jsonl", "z")
	select {
	case err := <-done:
		want(err, `"0004.jsonl"`)
	case <-time.After(15 * time.Second):
		t.Fatal("the route read on past an object added behind its cursor")
	}
	if got := plantest.SQLiteIDs(t, e.DB, "orders"); !slices.Equal(got, []string{"a", "c", "d"}) {
		t.Errorf("rows %v, want [a c d]", got)
	}
}
