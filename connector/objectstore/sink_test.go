package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// objectPlan is file → (dlq file) → object_store at url.
func objectPlan(e plantest.Env, url string, batch, concurrency int, attrs map[string]plan.Value) plan.Plan {
	sinkAttrs := map[string]plan.Value{"url": plantest.Tmpl(plantest.Lit(url))}
	for k, v := range s3TestAttrs(url) {
		sinkAttrs[k] = v
	}
	for k, v := range attrs {
		sinkAttrs[k] = v
	}
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": plantest.Str(e.Input), "mode": plantest.Enum("consume"),
			"checkpoint_store": plantest.Str("pebble://" + e.State), "max_record_bytes": plantest.Int(plantest.MaxRecordBytes)}},
		plantest.DLQFile("n1", e.DLQ, ""),
		{ID: "n2", Role: plan.RoleSink, Kind: "object_store", Attrs: sinkAttrs},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "objects", Guarantee: plan.EffectivelyOnce, Concurrency: concurrency, BatchSize: batch,
		Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

// testS3Options address the S3 emulator's buckets in the path; its
// endpoint and credentials come from the environment (startS3).
var testS3Options = s3Options{PathStyle: true}

// s3TestAttrs are the attributes an s3:// url needs to reach the emulator.
func s3TestAttrs(url string) map[string]plan.Value {
	if !strings.HasPrefix(url, "s3://") {
		return nil
	}
	return map[string]plan.Value{"path_style": {Type: plan.TBool, Bool: true}}
}

// startS3 starts an S3 emulator with bucket lake and points the AWS SDK at
// it through the environment (inherited by a crash helper).
func startS3(t testing.TB) *testsrv.S3Server {
	t.Helper()
	srv := testsrv.NewS3(t, "lake")
	for _, kv := range srv.S3Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return srv
}

// openTestStore opens the store a sink at url writes to, for reading back.
func openTestStore(t testing.TB, url string) objectStore {
	t.Helper()
	s, err := openObjectStore(context.Background(), url, "", testS3Options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func decompress(t testing.TB, name string, data []byte) []byte {
	t.Helper()
	switch {
	case strings.HasSuffix(name, ".gz"):
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	case strings.HasSuffix(name, ".zst"):
		d, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		out, err := d.DecodeAll(data, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	return data
}

// readObjectParts checks every part under the store: names parse, ranges
// do not overlap, each part holds the input lines of its range. It returns
// how often each position was written and the part names.
func readObjectParts(t testing.TB, st objectStore, ds plantest.Dataset) (map[uint64]int, []string) {
	t.Helper()
	names, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	var lastEnd int64 = -1
	for _, name := range names {
		m := objectPartRE().FindStringSubmatch(name)
		if m == nil {
			t.Errorf("unexpected object %s", name)
			continue
		}
		if !strings.HasPrefix(m[1], "orders.") || m[2] != "0000000000" {
			t.Errorf("part %s: source %q partition %q, want orders.<route>.<file key> 0000000000", name, m[1], m[2])
		}
		start, end := wholeRecordSpan(t, name, m[3])
		if int64(start) <= lastEnd {
			t.Errorf("part %s overlaps the previous part (ending %d)", name, lastEnd)
		}
		lastEnd = int64(end)
		data, err := st.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		data = decompress(t, name, data)
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if uint64(len(lines)) != end-start+1 {
			t.Errorf("part %s holds %d lines for %d positions", name, len(lines), end-start+1)
			continue
		}
		for i, l := range lines {
			p := start + uint64(i)
			if l != ds.Lines[p] {
				t.Errorf("part %s line %d: %q, want input line %d %q", name, i, l, p, ds.Lines[p])
			}
			seen[p]++
		}
	}
	return seen, names
}

// wholeRecordSpan is the first and last source positions of a part of
// whole records, span its name's span (a route without unnest writes no
// other).
func wholeRecordSpan(t testing.TB, name, span string) (start, end uint64) {
	t.Helper()
	first, last, _ := strings.Cut(span, "-")
	start, err1 := strconv.ParseUint(first, 10, 64)
	end, err2 := strconv.ParseUint(last, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("part %s: span %q is not one of whole records", name, span)
	}
	return start, end
}

// failingListStore fails the first failures List calls.
type failingListStore struct {
	objectStore
	failures atomic.Int32
	lists    atomic.Int32
}

func (s *failingListStore) List(ctx context.Context, prefix string) ([]string, error) {
	s.lists.Add(1)
	if s.failures.Add(-1) >= 0 {
		return nil, errors.New("injected listing failure")
	}
	return s.objectStore.List(ctx, prefix)
}

// testObjectStoreSourcePosition runs the positional scenarios against url:
// a run cancelled mid-way and resumed on other batch boundaries, a full
// replay with another batch size (writes nothing), and a resume whose first
// listing fails.
func testObjectStoreSourcePosition(t *testing.T, url string, attrs map[string]plan.Value, del func(name string)) {
	e := plantest.NewEnv(t)
	const n = 30000
	ds := plantest.GenDataset(t, e.Input, n, 7)
	want, bad := plantest.PartsWant(ds)
	st := openTestStore(t, url)

	// (a) cancelled mid-way, resumed with other batch boundaries.
	first := runtest.RunCancelled(t, objectPlan(e, url, 300, 3, attrs), "objects", 5*time.Millisecond)
	second := runRoute(t, objectPlan(e, url, 211, 1, attrs), "objects")
	t.Logf("first %+v second %+v", first, second)
	if first.Committed+second.In != n {
		t.Errorf("first committed %d, second read %d: want %d in all", first.Committed, second.In, n)
	}
	seen, names := readObjectParts(t, st, ds)
	plantest.CheckPartsExactlyOnce(t, seen, want)
	plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), bad, true)

	// (b) a full replay (fresh checkpoint) with another batch size writes
	// nothing: every position is covered by an existing part.
	if err := os.RemoveAll(e.State); err != nil {
		t.Fatal(err)
	}
	replay := runRoute(t, objectPlan(e, url, 777, 2, attrs), "objects")
	if replay.In != n || replay.Out != 0 || replay.Deduplicated != int64(len(want)) {
		t.Errorf("replay %+v: want in %d, out 0, deduplicated %d", replay, n, len(want))
	}
	seen, after := readObjectParts(t, st, ds)
	if len(after) != len(names) {
		t.Errorf("replay wrote %d new objects", len(after)-len(names))
	}
	plantest.CheckPartsExactlyOnce(t, seen, want)

	// (c) a replay from the middle whose first listing fails: nothing is
	// written blind, the listing is tried again, no position lands twice.
	if err := os.RemoveAll(e.State); err != nil {
		t.Fatal(err)
	}
	var wrapped *failingListStore
	objectStoreHook = func(s objectStore) objectStore {
		wrapped = &failingListStore{objectStore: s}
		wrapped.failures.Store(1)
		return wrapped
	}
	defer func() { objectStoreHook = nil }()
	// Drop the parts of the second half, as if the run had crashed there.
	kept := dropPartsFrom(t, names, n/2, del)
	rec := runRoute(t, objectPlan(e, url, 500, 2, attrs), "objects")
	objectStoreHook = nil
	if got := wrapped.lists.Load(); got != 2 {
		t.Errorf("listed %d times, want 2 (one injected failure, one success)", got)
	}
	if rec.Out == 0 || rec.Deduplicated != kept {
		t.Errorf("recovery %+v: want the dropped half rewritten and the first half skipped", rec)
	}
	seen, _ = readObjectParts(t, st, ds)
	plantest.CheckPartsExactlyOnce(t, seen, want)
	t.Logf("replay %+v recovery %+v", replay, rec)
}

// dropPartsFrom deletes the parts starting at or after position from and
// returns how many positions the remaining parts cover.
func dropPartsFrom(t *testing.T, names []string, from uint64, del func(name string)) int64 {
	t.Helper()
	var kept int64
	for _, name := range names {
		m := objectPartRE().FindStringSubmatch(name)
		if m == nil {
			t.Fatalf("unexpected object %s", name)
		}
		start, end := wholeRecordSpan(t, name, m[3])
		if start < from {
			kept += int64(end - start + 1)
			continue
		}
		del(name)
	}
	return kept
}

func TestObjectStoreFileSourcePosition(t *testing.T) {
	for _, comp := range []string{"none", "zstd"} {
		t.Run(comp, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "lake", "orders")
			testObjectStoreSourcePosition(t, "file://"+dir, map[string]plan.Value{
				"name_by": plantest.Enum("auto"), "compression": plantest.Enum(comp)},
				func(name string) {
					if err := os.Remove(filepath.Join(dir, name)); err != nil {
						t.Fatal(err)
					}
				})
		})
	}
}

func TestObjectStoreGCSSourcePosition(t *testing.T) {
	srv := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost())
	client := srv.Client(t)
	testObjectStoreSourcePosition(t, "gs://lake/orders", map[string]plan.Value{
		"name_by": plantest.Enum("source_position"), "compression": plantest.Enum("gzip"),
		// Small objects: runs are cut at the size limit too.
		"max_object_bytes": plantest.Int(64 << 10)},
		func(name string) {
			if err := client.Bucket("lake").Object("orders/" + name).Delete(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
}

func TestObjectStoreWriteTime(t *testing.T) {
	e := plantest.NewEnv(t)
	const n = 5000
	ds := plantest.GenDataset(t, e.Input, n, 8)
	want, _ := plantest.PartsWant(ds)
	dir := filepath.Join(t.TempDir(), "out")
	url := "file://" + dir
	stats, err := runtime.Run(context.Background(), objectPlan(e, url, 400, 1, map[string]plan.Value{
		"name_by": plantest.Enum("write_time"), "date_partition": {Type: plan.TBool, Bool: true},
		"compression": plantest.Enum("gzip"), "max_object_bytes": plantest.Int(32 << 10)}), runtest.Options())
	if err != nil {
		t.Fatal(err)
	}
	rs := stats.Route("objects")
	runtest.CheckCounts(t, rs)
	st := openTestStore(t, url)
	names, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now().UTC().Format("2006/01/02/")
	lines := map[string]int{}
	for _, name := range names {
		if !strings.HasPrefix(name, day) || !strings.HasSuffix(name, ".jsonl.gz") {
			t.Errorf("object %s: want %s<uuidv7>.jsonl.gz", name, day)
		}
		data, err := st.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		body := decompress(t, name, data)
		if len(body) > 32<<10 {
			t.Errorf("object %s holds %d bytes, over max_object_bytes", name, len(body))
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
			lines[l]++
		}
	}
	var total int
	for p := range want {
		total++
		if lines[ds.Lines[p]] == 0 {
			t.Errorf("position %d missing", p)
		}
	}
	if rs.Out != int64(total) {
		t.Errorf("out %d, want %d", rs.Out, total)
	}
	if len(names) < 2 {
		t.Errorf("%d objects: max_object_bytes did not split", len(names))
	}
	t.Logf("%d objects, %+v", len(names), rs)
}

func TestCrashObjectStoreExactlyOnce(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	srv := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost()) // inherited by the helper
	startS3(t)
	// The GCS emulator finds an object by scanning every object in the
	// bucket, so its puts and gets slow as parts pile up: 100,000 records
	// (3,900 parts) took 20 s there, 3 s on the others. The gs case takes
	// 70,000: its four killed runs got through 5,000 to 22,000 records
	// before the final run, so the kills still land mid-stream.
	for i, tc := range []struct {
		url string
		n   int
	}{{"gs://lake/crash", 70000}, {"file://" + filepath.Join(t.TempDir(), "crash"), 100000}, {"s3://lake/crash", 100000}} {
		url := tc.url
		seed := uint64(31 + i)
		e := plantest.NewEnv(t)
		ds := plantest.GenDataset(t, e.Input, tc.n, seed)
		want, bad := plantest.PartsWant(ds)
		p := objectPlan(e, url, 700, 2, map[string]plan.Value{"name_by": plantest.Enum("source_position")})
		st := runtest.CrashAndFinish(t, bin, p, e.Dir, seed, 4)
		rs := st.Route("objects")
		runtest.CheckCounts(t, rs)
		t.Logf("%s: final run %+v", url, rs)
		seen, names := readObjectParts(t, openTestStore(t, url), ds)
		plantest.CheckPartsExactlyOnce(t, seen, want)
		plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), bad, false)
		t.Logf("%s: %d parts", url, len(names))
	}
}

// runRoute runs p to its end and returns route's stats, whose counts must
// add up.
func runRoute(t testing.TB, p plan.Plan, route string) runtime.RouteStats {
	t.Helper()
	return runtest.RunRoute(t, context.Background(), p, runtest.Options(), route)
}

// BenchmarkObjectStoreGCS: file → object_store (source_position parts) on
// the GCS emulator, one fresh prefix per run.
func BenchmarkObjectStoreGCS(b *testing.B) {
	const n = 100000
	srv := testsrv.NewGCS(b, "lake")
	b.Setenv("STORAGE_EMULATOR_HOST", srv.EmulatorHost())
	input, size := plantest.BenchInput(b, n)
	runtest.Bench(b, n, size, func(i int, state string) plan.Plan {
		e := plantest.Env{Input: input, State: state, DLQ: filepath.Join(state, "dlq.jsonl")}
		return objectPlan(e, fmt.Sprintf("gs://lake/run%d", i), 1024, 1, map[string]plan.Value{"name_by": plantest.Enum("source_position")})
	})
}

// deniedListStore refuses every listing for good.
type deniedListStore struct{ objectStore }

func (deniedListStore) List(context.Context, string) ([]string, error) {
	return nil, &permanentError{errors.New("403 Forbidden: storage.objects.list denied")}
}

// A listing refused for good fails the route, naming the store, instead of
// writing parts it cannot check against the ones already there.
func TestObjectStoreListingDenied(t *testing.T) {
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 10)
	dir := filepath.Join(t.TempDir(), "out")
	objectStoreHook = func(s objectStore) objectStore { return deniedListStore{s} }
	defer func() { objectStoreHook = nil }()
	runtest.RunRefused(t, objectPlan(e, "file://"+dir, 4, 1, map[string]plan.Value{"name_by": plantest.Enum("source_position")}),
		[]string{"route objects", "file://" + dir, "refused"})
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("%d objects written without a listing", len(names))
	}
}

func TestObjectStoreS3SourcePosition(t *testing.T) {
	srv := startS3(t)
	testObjectStoreSourcePosition(t, "s3://lake/orders", map[string]plan.Value{
		"name_by": plantest.Enum("source_position"), "compression": plantest.Enum("zstd"),
		"max_object_bytes": plantest.Int(64 << 10)},
		func(name string) {
			if _, err := srv.Backend().DeleteObject("lake", "orders/"+name); err != nil {
				t.Fatal(err)
			}
		})
}

// TestObjectStoreS3Premise compiles an s3:// positional sink as mqbc does:
// the plan carries the put_if_absent premise, the route runs on a server
// that honours If-None-Match (leaving no probe object behind), and is
// refused before its first record on one that ignores it.
func TestObjectStoreS3Premise(t *testing.T) {
	srv := startS3(t)
	src := func(prefix string) string {
		return `
route objects {
  guarantee effectively_once
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to object_store {
    url        = "s3://lake/` + prefix + `"
    endpoint   = "` + srv.Endpoint() + `"
    path_style = true
    name_by    = source_position
  }
}
`
	}
	for _, tc := range []struct {
		name   string
		ignore bool
	}{{"honoured", false}, {"ignored", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"id":"a"}`, `{"id":"b"}`, `not json`)
			p := plantest.Compile(t, src(tc.name))
			var premises []plan.Premise
			for _, pr := range p.Routes[0].Premises {
				if pr.Kind == plan.PremisePutIfAbsent {
					premises = append(premises, pr)
				}
			}
			if len(premises) != 1 || premises[0].When != plan.CheckStartup {
				t.Fatalf("premises %+v: want one start-up put_if_absent", p.Routes[0].Premises)
			}
			srv.IgnoreIfNoneMatch(tc.ignore)
			defer srv.IgnoreIfNoneMatch(false)
			st := openTestStore(t, "s3://lake/"+tc.name)
			if tc.ignore {
				opts := runtest.Options()
				opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
				_, err := runtime.Run(context.Background(), p, opts)
				if err == nil || !strings.Contains(err.Error(), "If-None-Match") {
					t.Fatalf("run on a server ignoring If-None-Match: %v, want the premise refused", err)
				}
				names, _ := st.List(context.Background(), "part-")
				if len(names) != 0 {
					t.Errorf("parts written before the premise was checked: %v", names)
				}
				return
			}
			rs := runtest.RunIn(t, dir, p).Route("objects")
			if rs.Out != 2 || rs.DeadLettered != 1 {
				t.Errorf("%+v: want out 2, the bad line dead-lettered", rs)
			}
			names, err := st.List(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != 1 || !strings.HasPrefix(names[0], "part-") {
				t.Errorf("objects %v: want one part and no probe left", names)
			}
		})
	}
}

// restarter is an emulator that can go away for a while (testsrv.GCSServer,
// testsrv.S3Server).
type restarter interface {
	Restart(t testing.TB, downtime time.Duration)
}

// The emulator goes away mid-run and comes back: failed puts are retried
// by the retry step (a put that did land answers 412, which is success)
// and every record is still in exactly one part.
func TestObjectStoreOutage(t *testing.T) {
	gcs := testsrv.NewGCS(t, "lake")
	t.Setenv("STORAGE_EMULATOR_HOST", gcs.EmulatorHost())
	s3 := startS3(t)
	// The gs case takes half the records: the GCS emulator's puts slow as
	// parts pile up (it scans the bucket for each), and 30,000 records
	// are still mostly written after the outage, which starts at the
	// first progress report with a fifth of 60,000 read.
	for i, tc := range []struct {
		url string
		srv restarter
		n   int
	}{{"gs://lake/outage", gcs, 30000}, {"s3://lake/outage", s3, 60000}} {
		t.Run(strings.SplitN(tc.url, ":", 2)[0], func(t *testing.T) {
			e := plantest.NewEnv(t)
			ds := plantest.GenDataset(t, e.Input, tc.n, uint64(9+i))
			want, bad := plantest.PartsWant(ds)
			p := plantest.WithRetryAt(objectPlan(e, tc.url, 256, 2, map[string]plan.Value{"name_by": plantest.Enum("source_position")}), 1, 100) // before the DLQ
			opts := runtest.Options()
			runtest.OnFirstProgress(&opts, 20*time.Millisecond, func(progress string) {
				t.Logf("stopping the emulator: %s", progress)
				tc.srv.Restart(t, 500*time.Millisecond)
			})
			st, err := runtime.Run(context.Background(), p, opts)
			if err != nil {
				t.Fatal(err)
			}
			rs := st.Route("objects")
			runtest.CheckCounts(t, rs)
			seen, names := readObjectParts(t, openTestStore(t, tc.url), ds)
			plantest.CheckPartsExactlyOnce(t, seen, want)
			plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), bad, true)
			// A record a failed attempt had already written is out, not a duplicate.
			if rs.Out != int64(len(want)) || rs.Deduplicated != 0 {
				t.Errorf("%+v: want out %d, deduplicated 0", rs, len(want))
			}
			t.Logf("%d parts; %+v", len(names), rs)
		})
	}
}
