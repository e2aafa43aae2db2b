package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/cockroachdb/pebble"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/internal/pebbledb"
)

// twoRoutesSrc is two routes in one file reading the same orders, each
// deduplicating on the order id in the same store (store is a dedup
// attribute line, or "" for the default store), each loading its own
// table: neither may drop a record because the other has seen its key.
func twoRoutesSrc(dir, store string) string {
	var b strings.Builder
	for _, table := range []string{"orders", "lines"} {
		fmt.Fprintf(&b, `
route %[1]s {
  batch_size = 256
  from file { path = %[2]q }
  id payload.order_id
  dedup {
    key  = meta["mqb.id"]
    keep = true # the sink absorbs its repeats; kept for the store under test
    %[3]s
  }
  to sql {
    url          = %[4]q
    create_table = "CREATE TABLE IF NOT EXISTS %[1]s (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO %[1]s (id, amount) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`, table, filepath.Join(dir, "in.jsonl"), store, "sqlite://"+filepath.Join(dir, table+".db"))
	}
	return b.String()
}

// writeRepeatedOrders writes n lines over n*3/4 distinct order ids and
// returns the distinct ids, sorted.
func writeRepeatedOrders(t testing.TB, path string, n int) []string {
	t.Helper()
	distinct := n * 3 / 4
	lines := make([]string, n)
	seen := map[string]bool{}
	for i := range n {
		k := i
		if i >= distinct {
			k = (i * 7) % distinct // a repeat of an earlier order
		}
		id := fmt.Sprintf("o-%06d", k)
		seen[id] = true
		lines[i] = fmt.Sprintf(`{"order_id":%q,"amount":%d}`, id, k)
	}
	writeLines(t, path, lines...)
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func checkTwoRoutes(t *testing.T, dir string, st runtime.Stats, n int, want []string) {
	t.Helper()
	for _, table := range []string{"orders", "lines"} {
		rs := st.Route(table)
		checkCounts(t, rs)
		if rs.Committed != int64(n) {
			t.Errorf("route %s committed %d of %d", table, rs.Committed, n)
		}
		sameIDs(t, "table "+table, sqliteIDs(t, filepath.Join(dir, table+".db"), table), want)
	}
}

// TestTwoRoutesDefaultDedupStore: two routes with default stores in one
// file, both deduplicating on the same ids, each load every record.
func TestTwoRoutesDefaultDedupStore(t *testing.T) {
	dir := t.TempDir()
	const n = 4000
	want := writeRepeatedOrders(t, filepath.Join(dir, "in.jsonl"), n)
	st := runIn(t, dir, compileMQB(t, twoRoutesSrc(dir, "")))
	checkTwoRoutes(t, dir, st, n, want)
	for _, name := range []string{"orders", "lines"} {
		if rs := st.Route(name); rs.In != n || rs.Deduplicated != int64(n-len(want)) {
			t.Errorf("route %s: %+v, want in %d, deduplicated %d", name, rs, n, n-len(want))
		}
	}
	// A second run reads nothing new: each route resumes at its own end.
	st = runIn(t, dir, compileMQB(t, twoRoutesSrc(dir, "")))
	for _, rs := range st.Routes {
		if rs.In != 0 {
			t.Errorf("rerun of route %s read %d records", rs.Name, rs.In)
		}
	}
}

// TestTwoRoutesSharedPostgresDedupStore: the same on one PostgreSQL dedup
// store, the kind several instances share.
func TestTwoRoutesSharedPostgresDedupStore(t *testing.T) {
	url := testsrv.Postgres(t)
	dir := t.TempDir()
	const n = 3000
	want := writeRepeatedOrders(t, filepath.Join(dir, "in.jsonl"), n)
	st := runIn(t, dir, compileMQB(t, twoRoutesSrc(dir, fmt.Sprintf("store = %q", url))))
	checkTwoRoutes(t, dir, st, n, want)
}

// TestTwoRoutesSharedNamespace: a namespace named on purpose is shared
// across routes: what one route delivered, the other drops.
func TestTwoRoutesSharedNamespace(t *testing.T) {
	dir := t.TempDir()
	const n = 1000
	want := writeRepeatedOrders(t, filepath.Join(dir, "in.jsonl"), n)
	src := strings.ReplaceAll(twoRoutesSrc(dir, `namespace = "orders"`), "batch_size = 256", "batch_size = 256\n  concurrency = 1")
	st := runIn(t, dir, compileMQB(t, src))
	a, b := st.Route("orders"), st.Route("lines")
	if got := a.Out + b.Out; got != int64(len(want)) {
		t.Errorf("the routes delivered %d + %d records, want %d between them (a shared namespace)", a.Out, b.Out, len(want))
	}
}

// TestCrashTwoRoutesDedup SIGKILLs the two routes mid-run, with the
// default Pebble store and with a shared PostgreSQL store: each table still
// ends with every order.
func TestCrashTwoRoutesDedup(t *testing.T) {
	bin := buildCrashHelper(t)
	for _, store := range []string{"pebble", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			const n = 60000
			want := writeRepeatedOrders(t, filepath.Join(dir, "in.jsonl"), n)
			// The crash helper runs the plan as written: the default
			// store is spelled out, as `mqbc run` resolves it.
			attr := fmt.Sprintf("store = %q", "pebble://"+filepath.Join(dir, ".mqb", "dedup"))
			if store == "postgres" {
				attr = fmt.Sprintf("store = %q", testsrv.Postgres(t))
			}
			p := compileMQB(t, twoRoutesSrc(dir, attr))
			for i := range p.Routes {
				p.Routes[i].Nodes[0].Attrs["checkpoint_store"] = plan.Value{Type: plan.TString, Str: "pebble://" + filepath.Join(dir, ".mqb", "state")}
			}
			st := crashAndFinish(t, bin, p, dir, 31, 5)
			checkTwoRoutes(t, dir, st, n, want)
		})
	}
}

// TestLegacyDedupStoreRefused: a store written before routes kept their
// keys apart is refused at start-up, naming the commands that settle it.
func TestLegacyDedupStoreRefused(t *testing.T) {
	dir := t.TempDir()
	writeRepeatedOrders(t, filepath.Join(dir, "in.jsonl"), 10)
	h, err := pebbledb.Open(filepath.Join(dir, "state", "dedup"))
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, 9)
	val[0] = 2
	binary.LittleEndian.PutUint64(val[1:], uint64(time.Now().Add(time.Hour).UnixNano()))
	if err := h.DB.Set([]byte("dedup/o-000001"), val, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	h.Close()
	opts := testOptions(t)
	opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
	_, err = runtime.Run(context.Background(), compileMQB(t, twoRoutesSrc(dir, "")), opts)
	if err == nil || !strings.Contains(err.Error(), "holds 1 dedup keys written by an mqb that kept one key space") ||
		!strings.Contains(err.Error(), "Remove that store") {
		t.Fatalf("err %v, want the legacy store refused", err)
	}
}
