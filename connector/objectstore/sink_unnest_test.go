package objectstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// unnestObjectPlan is file → unnest payload.items → (dlq file) →
// object_store at url, parts named by source position and cut at maxBytes,
// so that most parts start or end inside a record's elements.
func unnestObjectPlan(e plantest.Env, url string, batch, concurrency int, maxBytes int64) plan.Plan {
	p := objectPlan(e, url, batch, concurrency, map[string]plan.Value{
		"name_by": plantest.Enum("source_position"), "max_object_bytes": plantest.Int(maxBytes)})
	unnest := plan.Node{ID: "u", Role: plan.RoleStep, Kind: "unnest", Side: plan.SideInput, Attrs: map[string]plan.Value{
		"path": {Type: plan.TList, List: []plan.Value{plantest.Str("items")}, Stable: true}}}
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = append(append(nodes[:1:1], unnest), nodes[1:]...)
	p.Routes[0].Edges = plantest.Chain(p.Routes[0].Nodes)
	return p
}

// elemDataset is an input of records with arrays to unnest.
type elemDataset struct {
	records int
	// elems are the elements a clean run writes: record index and the
	// element's index there ("r<record>/<index>", as the elements carry).
	elems map[string]bool
	// counts is, by record, how many elements it has (0: none, or bad).
	counts map[uint64]int
	bad    map[uint64]bool // records that go to the DLQ
}

// genElements writes n records to path: most with 1 to 9 elements, some
// with none (filtered), some malformed or without an array (DLQ).
func genElements(t testing.TB, path string, n int, seed uint64) elemDataset {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	ds := elemDataset{records: n, elems: map[string]bool{}, counts: map[uint64]int{}, bad: map[uint64]bool{}}
	var b strings.Builder
	for i := range n {
		pos := uint64(i)
		switch r := rng.IntN(100); {
		case r < 3:
			fmt.Fprintf(&b, "{\"id\": \"r%d\", \"items\": [broken\n", i)
			ds.bad[pos] = true
		case r < 6:
			fmt.Fprintf(&b, "{\"id\": \"r%d\", \"items\": \"x\"}\n", i)
			ds.bad[pos] = true
		case r < 10:
			fmt.Fprintf(&b, "{\"id\": \"r%d\", \"items\": []}\n", i)
		default:
			k := 1 + rng.IntN(9)
			var items []string
			for j := range k {
				e := fmt.Sprintf("r%d/%d", i, j)
				ds.elems[e] = true
				items = append(items, fmt.Sprintf(`{"e": %q, "pad": %q}`, e, strings.Repeat("p", rng.IntN(20))))
			}
			ds.counts[pos] = k
			fmt.Fprintf(&b, "{\"id\": \"r%d\", \"items\": [%s]}\n", i, strings.Join(items, ", "))
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return ds
}

// elemSpan is a part's span read from its name: the first and last
// element, an index of -1 standing for the record's first (at the start)
// or last (at the end).
type elemSpan struct {
	first, last   uint64
	firstK, lastK int64
}

// parseElemSpan reads a span's text independently of the sink's code:
// <first>[.<index>]-<last>[.<index>].
func parseElemSpan(t testing.TB, name, text string) elemSpan {
	t.Helper()
	side := func(s string) (uint64, int64) {
		seq, kid, ok := strings.Cut(s, ".")
		p, err := strconv.ParseUint(seq, 10, 64)
		if err != nil || len(seq) != 20 {
			t.Fatalf("part %s: position %q", name, seq)
		}
		if !ok {
			return p, -1
		}
		k, err := strconv.ParseInt(kid, 10, 64)
		if err != nil || len(kid) != 10 {
			t.Fatalf("part %s: element index %q", name, kid)
		}
		return p, k
	}
	a, b, _ := strings.Cut(text, "-")
	var s elemSpan
	s.first, s.firstK = side(a)
	s.last, s.lastK = side(b)
	return s
}

// readElemParts checks every part under st against ds: its name parses,
// it holds the consecutive elements its span names, first to last. It
// returns how often each element was written and the part names, sorted.
func readElemParts(t testing.TB, st objectStore, ds elemDataset) (map[string]int, []string) {
	t.Helper()
	names, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	seen := map[string]int{}
	for _, name := range names {
		m := objectPartRE().FindStringSubmatch(name)
		if m == nil {
			t.Errorf("unexpected object %s", name)
			continue
		}
		span := parseElemSpan(t, name, m[3])
		data, err := st.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		var got [][2]int64 // record, index
		for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			var v struct{ E string }
			var rec, k int64
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("part %s: line %q: %v", name, l, err)
			}
			if _, err := fmt.Sscanf(v.E, "r%d/%d", &rec, &k); err != nil {
				t.Fatalf("part %s: line %q: %v", name, l, err)
			}
			seen[v.E]++
			got = append(got, [2]int64{rec, k})
		}
		// The elements run from the span's first to its last, each the
		// one after the one before.
		first, last := got[0], got[len(got)-1]
		wantFirstK := max(span.firstK, 0)
		wantLastK := span.lastK
		if wantLastK < 0 {
			wantLastK = int64(ds.counts[span.last]) - 1
		}
		if first != [2]int64{int64(span.first), wantFirstK} || last != [2]int64{int64(span.last), wantLastK} {
			t.Errorf("part %s holds %v to %v", name, first, last)
		}
		for i := 1; i < len(got); i++ {
			p, c := got[i-1], got[i]
			next := c == [2]int64{p[0], p[1] + 1} || (c == [2]int64{p[0] + 1, 0} && p[1] == int64(ds.counts[uint64(p[0])])-1)
			if !next {
				t.Errorf("part %s: element %v follows %v", name, c, p)
			}
		}
	}
	return seen, names
}

// insideRecord counts the parts that start or end inside a record's
// elements.
func insideRecord(names []string) int {
	n := 0
	for _, name := range names {
		m := objectPartRE().FindStringSubmatch(name)
		if m != nil && strings.Contains(m[3], ".") {
			n++
		}
	}
	return n
}

// A kill can land between two parts of one record's elements (parts are
// cut at a few hundred bytes, so most records span two or more): the next
// run re-reads the record, skips exactly the elements the parts written
// so far hold, and writes the rest. Every element lands once, and the test
// checks that a killed run did leave a record cut in two for the last run
// to finish: where a kill lands is timing, so seeds are run (two at least,
// eight at most) until one has. The input is large enough that no killed
// run reaches its end: a split the last killed run leaves is what the
// final run shows, and with 5,000 records the later runs of a loaded
// machine finished the input before their kill, leaving none.
func TestCrashObjectStoreUnnestExactlyOnce(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	splits := 0
	for seed := uint64(41); seed < 49 && (seed < 43 || splits == 0); seed++ {
		e := plantest.NewEnv(t)
		url := "file://" + filepath.Join(t.TempDir(), "crash")
		ds := genElements(t, e.Input, 20000, seed)
		planPath := plantest.WriteCrashPlan(t, unnestObjectPlan(e, url, 200, 2, 300), e.Dir)
		plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: 4, MayEnd: true,
			Wait: plantest.KillWaits(seed, 5, 400*time.Millisecond, 800*time.Millisecond)})
		store := openTestStore(t, url)
		killed, _ := readElemParts(t, store, ds)
		var st runtime.Stats
		plantest.StartHelper(t, bin, planPath).Finish(t, &st)
		rs := st.Route("objects")
		runtest.CheckCounts(t, rs)
		t.Logf("seed %d: final run %+v", seed, rs)
		seen, names := readElemParts(t, store, ds)
		plantest.CheckElementsExactlyOnce(t, seen, ds.elems)
		plantest.CheckDLQ(t, plantest.ReadDLQ(t, e.DLQ), ds.bad, false)
		// A record some of whose elements the killed runs wrote and the
		// rest the last run.
		split := 0
		for pos, n := range ds.counts {
			had := 0
			for k := range n {
				if killed[fmt.Sprintf("r%d/%d", pos, k)] > 0 {
					had++
				}
			}
			if had > 0 && had < n {
				split++
			}
		}
		splits += split
		t.Logf("seed %d: %d parts, %d starting or ending inside a record; records finished by the last run after a kill inside them: %d", seed, len(names), insideRecord(names), split)
	}
	if splits == 0 {
		t.Errorf("no kill of any seed left a record with some of its elements written: the test does not test that")
	}
}

// The state a kill between two parts of one record leaves, made without a
// kill: a clean run's parts up to one that ends inside a record's
// elements, the rest deleted, and no checkpoint. The replay skips the
// elements the kept parts hold (counted as deduplicated), writes the rest
// of that record from the element after the kept part's last, and every
// element lands once.
func TestObjectStoreUnnestReplayInsideRecord(t *testing.T) {
	e := plantest.NewEnv(t)
	dir := filepath.Join(t.TempDir(), "lake")
	url := "file://" + dir
	ds := genElements(t, e.Input, 3000, 5)
	runRoute(t, unnestObjectPlan(e, url, 64, 1, 150), "objects")
	st := openTestStore(t, url)
	seen, names := readElemParts(t, st, ds)
	plantest.CheckElementsExactlyOnce(t, seen, ds.elems)

	// Keep the parts through one ending inside a record, half-way.
	cut := -1
	for i := len(names) / 2; i < len(names); i++ {
		m := objectPartRE().FindStringSubmatch(names[i])
		if span := parseElemSpan(t, names[i], m[3]); span.lastK >= 0 {
			cut = i
			break
		}
	}
	if cut < 0 {
		t.Fatal("no part ends inside a record's elements")
	}
	end := parseElemSpan(t, names[cut], objectPartRE().FindStringSubmatch(names[cut])[3])
	kept := 0
	for _, name := range names[:cut+1] {
		data, err := st.Get(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		kept += strings.Count(string(data), "\n")
	}
	for _, name := range names[cut+1:] {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(e.State); err != nil {
		t.Fatal(err)
	}

	replay := runRoute(t, unnestObjectPlan(e, url, 97, 2, 150), "objects")
	if replay.Deduplicated != int64(kept) || replay.Out != int64(len(ds.elems)-kept) {
		t.Errorf("replay %+v: want %d deduplicated (the kept parts' elements) and %d out", replay, kept, len(ds.elems)-kept)
	}
	seen, after := readElemParts(t, st, ds)
	plantest.CheckElementsExactlyOnce(t, seen, ds.elems)
	// The record cut in two is finished from the element after the kept
	// part's last.
	resumed := fmt.Sprintf("%020d.%010d-", end.last, end.lastK+1)
	if !slices.ContainsFunc(after, func(name string) bool { return strings.Contains(name, "-"+resumed) }) {
		t.Errorf("no part starts at %s after the replay: %v", resumed, after[cut:min(len(after), cut+4)])
	}
	t.Logf("first run %d parts, %d kept through %s; replay %+v", len(names), cut+1, names[cut], replay)
}
