package structural

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

const switchSrc = `
route split {
  batch_size  = 7
  concurrency = 2
  from file { path = "in.jsonl" }
  id payload.id
  dlq { to file { path = "dlq.jsonl" } }
  to switch {
    on = payload.kind
    case "a" {
      to sql {
        url          = "sqlite://out.db"
        create_table = "CREATE TABLE IF NOT EXISTS a (id TEXT PRIMARY KEY, n INTEGER NOT NULL CHECK (n >= 0))"
        insert_query = "INSERT INTO a (id, n) VALUES (${meta[\"mqb.id\"]}, ${payload.n}) ON CONFLICT (id) DO NOTHING"
      }
    }
    case "b" {
      to sql {
        url          = "sqlite://out.db"
        create_table = "CREATE TABLE IF NOT EXISTS b (id TEXT PRIMARY KEY, n INTEGER NOT NULL)"
        insert_query = "INSERT INTO b (id, n) VALUES (${meta[\"mqb.id\"]}, ${payload.n}) ON CONFLICT (id) DO NOTHING"
      }
    }
    default {
      to file { path = "other.jsonl" }
    }
  }
}
`

// TestSwitchToSQLiteAndFile routes on a payload field into two SQLite
// tables and a default file; a row branch "a" refuses goes to the DLQ named
// by its branch.
func TestSwitchToSQLiteAndFile(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	var wantA, wantB, wantOther []string
	for i := 1; i <= 60; i++ {
		id := fmt.Sprintf("r%03d", i)
		kind := []string{"a", "b", "c", ""}[i%4]
		n := i
		if i == 12 { // kind "a": a negative n fails a's CHECK
			n = -1
		}
		lines = append(lines, fmt.Sprintf(`{"id":%q,"kind":%q,"n":%d}`, id, kind, n))
		switch {
		case i == 12:
		case kind == "a":
			wantA = append(wantA, id)
		case kind == "b":
			wantB = append(wantB, id)
		default:
			wantOther = append(wantOther, id)
		}
	}
	lines = append(lines, `{"id":"r061","n":61}`) // no kind at all: default
	wantOther = append(wantOther, "r061")
	sort.Strings(wantOther)
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), lines...)

	st := runtest.RunIn(t, dir, plantest.Compile(t, switchSrc)).Route("split")
	if st.In != 61 || st.Out != 60 || st.DeadLettered != 1 || st.Unmatched != 0 {
		t.Errorf("stats %+v, want in 61 out 60 dead-lettered 1", st)
	}
	plantest.SameIDs(t, "table a", plantest.SQLiteIDs(t, filepath.Join(dir, "out.db"), "a"), wantA)
	plantest.SameIDs(t, "table b", plantest.SQLiteIDs(t, filepath.Join(dir, "out.db"), "b"), wantB)
	plantest.SameIDs(t, "default file", plantest.FileIDs(t, filepath.Join(dir, "other.jsonl")), wantOther)
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dlq), `switch case \"a\" (sql): sql insert: CHECK constraint failed`) {
		t.Errorf("dlq line does not name the branch and the reason: %s", dlq)
	}
}

// TestSwitchWithoutDefault drops and counts the records no case matches.
func TestSwitchWithoutDefault(t *testing.T) {
	dir := t.TempDir()
	src := `
route nodefault {
  from file { path = "in.jsonl" }
  to switch {
    on = payload.kind
    case "a" { to file { path = "a.jsonl" } }
    case "1" { to file { path = "one.jsonl" } }
  }
}
`
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id":"x1","kind":"a"}`, `{"id":"x2","kind":"b"}`, `{"id":"x3","kind":1}`,
		`{"id":"x4"}`, `{"id":"x5","kind":"a"}`, `{"id":"x6","kind":"z"}`)
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	stats, err := runtime.Run(context.Background(), plantest.Compile(t, src), opts)
	if err != nil {
		t.Fatal(err)
	}
	st := stats.Route("nodefault")
	runtest.CheckCounts(t, st)
	if st.In != 6 || st.Out != 6 || st.Unmatched != 3 || st.Committed != 6 {
		t.Errorf("stats %+v, want in 6 out 6 unmatched 3 committed 6", st)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var metric float64 = -1
	for _, mf := range mfs {
		if mf.GetName() == "mqb_records_unmatched_total" {
			for _, m := range mf.GetMetric() {
				metric = m.GetCounter().GetValue()
			}
		}
	}
	if metric != 3 {
		t.Errorf("mqb_records_unmatched_total = %v, want 3", metric)
	}
	plantest.SameIDs(t, "case a", plantest.FileIDs(t, filepath.Join(dir, "a.jsonl")), []string{"x1", "x5"})
	// Case values compare as strings: the number 1 matches case "1".
	plantest.SameIDs(t, "case 1", plantest.FileIDs(t, filepath.Join(dir, "one.jsonl")), []string{"x3"})
}

const requestSrc = `
route upsert_branch {
  from file { path = "%s" }
  id payload.id
  to request {
    call sql {
      url            = "sqlite://orders.db"
      create_table   = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
      insert_query   = "INSERT INTO orders (id, amount) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
      report_outcome = true
    }
    forward switch {
      on = meta["sql.outcome"]
      case "inserted" { to file { path = "new.jsonl" } }
      case "existed" { to file { path = "existed.jsonl" } }
      default { to file { path = "unrouted.jsonl" } }
    }
  }
}
`

// TestRequestInsertedExisted is the spec's insert-vs-duplicate branch: the
// SQL call tags each record inserted or existed, the forward switch routes
// on it, and a record the call fails is forwarded as it was, untagged, to
// the default.
func TestRequestInsertedExisted(t *testing.T) {
	dir := t.TempDir()
	// The second run's record without amount fails the insert (NOT NULL):
	// forwarded without an outcome, so it takes the default.
	runtest.InsertedExisted(t, dir, func(input string) plan.Plan { return plantest.Compile(t, fmt.Sprintf(requestSrc, input)) }, `{"id":"o099"}`)
	plantest.SameIDs(t, "unrouted", plantest.FileIDs(t, filepath.Join(dir, "unrouted.jsonl")), []string{"o099"})
	plantest.SameIDs(t, "table", plantest.SQLiteIDs(t, filepath.Join(dir, "orders.db"), "orders"), plantest.SeqIDs("o", 1, 50))
}

const fanoutSrc = `
route fan {
  guarantee effectively_once
  batch_size = %d
  from file {
    path             = "%s"
    max_record_bytes = 2048
  }
  id payload.order_id
  dlq { to file { path = "%s" } }
  to fanout {
    to sql {
      url          = "sqlite://%s"
      create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, body TEXT)"
      insert_query = "INSERT INTO orders (id, amount, body) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}, ${payload.body}) ON CONFLICT (id) DO NOTHING"
    }
    to file {
      path    = "%s"
      name_by = source_position
    }
  }
}
`

// TestFanoutSQLiteAndParts writes every record to SQLite and to part files.
func TestFanoutSQLiteAndParts(t *testing.T) {
	e := plantest.NewEnv(t)
	ds := plantest.GenDataset(t, e.Input, 3000, 3)
	p := plantest.Compile(t, fmt.Sprintf(fanoutSrc, 256, e.Input, filepath.Join(e.Dir, "dlq.jsonl"), e.DB, e.Parts))
	st := runtest.RunIn(t, e.Dir, p).Route("fan")
	if st.In != int64(ds.Records) || st.Committed != int64(ds.Records) {
		t.Errorf("stats %+v, want %d in and committed", st, ds.Records)
	}
	checkFanout(t, e, ds, true)
}

// TestCrashFanoutExactlyOnce SIGKILLs a fanout route into SQLite and part
// files at random moments: after the last run, SQLite holds every order
// exactly once, and every position is in exactly one part.
func TestCrashFanoutExactlyOnce(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	e := plantest.NewEnv(t)
	ds := plantest.GenDataset(t, e.Input, 100000, 31)
	p := plantest.Compile(t, fmt.Sprintf(fanoutSrc, 512, e.Input, filepath.Join(e.Dir, "dlq.jsonl"), e.DB, e.Parts))
	// The crash helper runs without a BaseDir or StateDir: keep its
	// checkpoint in the test's directory.
	p.Routes[0].Nodes[0].Attrs["checkpoint_store"] = plantest.Str("pebble://" + e.State)
	st := runtest.CrashAndFinish(t, bin, p, e.Dir, 31, 4).Route("fan")
	runtest.CheckCounts(t, st)
	t.Logf("final run %+v", st)
	if st.Committed != int64(ds.Records) {
		t.Errorf("final run committed %d of %d", st.Committed, ds.Records)
	}
	checkFanout(t, e, ds, false)
}

// checkFanout checks both fanout targets: SQLite has every good order once
// (dedup-free route: a repeated order id is absorbed by ON CONFLICT), and
// the part files hold every position at most once and every written one.
func checkFanout(t *testing.T, e plantest.Env, ds plantest.Dataset, exactDLQ bool) {
	t.Helper()
	// Every bad record reaches the DLQ (once, without kills).
	plantest.CheckDLQ(t, plantest.ReadDLQ(t, filepath.Join(e.Dir, "dlq.jsonl")), ds.Bad, exactDLQ)
	counts := runtest.SQLiteMap[int](t, e.DB, `SELECT 'rows', count(*) FROM orders UNION ALL SELECT 'distinct', count(DISTINCT id) FROM orders`)
	rows, distinct := counts["rows"], counts["distinct"]
	if rows != len(ds.IDs) || distinct != len(ds.IDs) {
		t.Errorf("sqlite has %d rows (%d distinct), want %d", rows, distinct, len(ds.IDs))
	}
	// The part target takes every line that is JSON (it needs no id);
	// a record SQLite refused is dead-lettered but the parts keep it.
	want, _ := plantest.PartsWant(ds)
	plantest.CheckPartsExactlyOnce(t, plantest.ReadParts(t, e.Parts, ds), want)
	if tmp, _ := filepath.Glob(filepath.Join(e.Parts, ".part-*")); len(tmp) > 0 {
		t.Errorf("temporary parts left behind: %v", tmp)
	}
}

// TestNestedStructuresAndRef nests a fanout and a request inside a switch,
// with a named endpoint used from two places.
func TestNestedStructuresAndRef(t *testing.T) {
	dir := t.TempDir()
	src := `
output audit = file { path = "audit.jsonl" }

route nested {
  from file { path = "in.jsonl" }
  id payload.id
  to switch {
    on = payload.kind
    case "a" {
      to fanout {
        to sql {
          url          = "sqlite://out.db"
          create_table = "CREATE TABLE IF NOT EXISTS a (id TEXT PRIMARY KEY)"
          insert_query = "INSERT INTO a (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
        }
        to ref audit
      }
    }
    case "b" {
      to request {
        call sql {
          url            = "sqlite://out.db"
          create_table   = "CREATE TABLE IF NOT EXISTS b (id TEXT PRIMARY KEY)"
          insert_query   = "INSERT INTO b (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
          report_outcome = true
        }
        forward switch {
          on = meta["sql.outcome"]
          case "inserted" { to ref audit }
          default { to file { path = "b-rest.jsonl" } }
        }
      }
    }
    default { to ref audit }
  }
}
`
	p := plantest.Compile(t, src)
	refs := 0
	var walk func(n plan.Node)
	walk = func(n plan.Node) {
		if n.Ref == "audit" {
			refs++
		}
		for _, b := range n.Children {
			walk(b.Node)
		}
	}
	for _, n := range p.Routes[0].Nodes {
		walk(n)
	}
	if refs != 3 {
		t.Fatalf("plan has %d nodes from ref audit, want 3", refs)
	}
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id":"n1","kind":"a"}`, `{"id":"n2","kind":"b"}`, `{"id":"n3","kind":"c"}`,
		`{"id":"n2","kind":"b"}`, `{"id":"n4","kind":"a"}`)
	st := runtest.RunIn(t, dir, p).Route("nested")
	if st.In != 5 || st.Out != 5 {
		t.Errorf("stats %+v, want in 5 out 5", st)
	}
	plantest.SameIDs(t, "table a", plantest.SQLiteIDs(t, filepath.Join(dir, "out.db"), "a"), []string{"n1", "n4"})
	plantest.SameIDs(t, "table b", plantest.SQLiteIDs(t, filepath.Join(dir, "out.db"), "b"), []string{"n2"})
	// audit: both "a" records (fanout), the fresh "b" (inserted) and the
	// default "c"; the repeated n2 existed and went to b-rest.
	plantest.SameIDs(t, "audit", plantest.FileIDs(t, filepath.Join(dir, "audit.jsonl")), []string{"n1", "n2", "n3", "n4"})
	plantest.SameIDs(t, "b-rest", plantest.FileIDs(t, filepath.Join(dir, "b-rest.jsonl")), []string{"n2"})
}

// TestBranchErrorsRetryable: a structural write is retryable only when
// every failing branch's error is.
func TestBranchErrorsRetryable(t *testing.T) {
	busy := runtime.Retryable(errors.New("database is locked"))
	bad := errors.New("no such table")
	for _, tc := range []struct {
		errs []error
		want bool
	}{
		{[]error{nil, busy}, true},
		{[]error{busy, busy}, true},
		{[]error{busy, bad}, false},
		{[]error{nil, bad}, false},
	} {
		err := joinBranchErrors(tc.errs)
		if got := runtime.IsRetryable(fmt.Errorf("switch: %w", err)); got != tc.want {
			t.Errorf("%v: retryable %v, want %v", tc.errs, got, tc.want)
		}
	}
}

// TestStructuralBuildErrorsNameTheBranch: a branch that cannot be built
// fails the route at start-up, naming the branch.
func TestStructuralBuildErrorsNameTheBranch(t *testing.T) {
	dir := t.TempDir()
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"id":"x"}`)
	p := plantest.Compile(t, `
route broken {
  from file { path = "in.jsonl" }
  to switch {
    on = payload.id
    case "x" { to file { path = "ok.jsonl" } }
    default { to sql { url = "sqlite://db.sqlite", insert_query = "INSERT INTO missing (id) VALUES (${payload.id})" } }
  }
}
`)
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
	_, err := runtime.Run(context.Background(), p, opts)
	if err == nil || !strings.Contains(err.Error(), "default (sql)") || !strings.Contains(err.Error(), "route broken") {
		t.Errorf("err = %v, want it to name the route and the default branch", err)
	}
}

// TestRequestRetryKeepsOutcome: when forward fails the batch after the
// call committed (here SQLite stays locked past its busy timeout), the
// route's retry forwards the responses the call gave the first time —
// "inserted" — instead of calling again and reading "existed".
func TestRequestRetryKeepsOutcome(t *testing.T) {
	dir := t.TempDir()
	plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), plantest.IDAmountLines("k", 1, 20)...)
	src := `
route keep {
  from file { path = "in.jsonl" }
  id payload.id
  retry {
    attempts = 5
    backoff  = 200ms
  }
  to request {
    call sql {
      url            = "sqlite://calls.db"
      create_table   = "CREATE TABLE IF NOT EXISTS calls (id TEXT PRIMARY KEY)"
      insert_query   = "INSERT INTO calls (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
      report_outcome = true
    }
    forward sql {
      url          = "sqlite://fwd.db"
      create_table = "CREATE TABLE IF NOT EXISTS fwd (id TEXT PRIMARY KEY, outcome TEXT NOT NULL)"
      insert_query = "INSERT INTO fwd (id, outcome) VALUES (${meta[\"mqb.id\"]}, ${meta[\"sql.outcome\"]}) ON CONFLICT (id) DO NOTHING"
    }
  }
}
`
	p := plantest.Compile(t, src)
	// Create the forward table and hold its write lock for longer than the
	// sink's busy timeout: the first forward fails with SQLITE_BUSY.
	plantest.LockOutcomeTable(t, filepath.Join(dir, "fwd.db"), "fwd")
	st := runtest.RunIn(t, dir, p).Route("keep")
	if st.In != 20 || st.Out != 20 {
		t.Errorf("stats %+v, want in 20 out 20", st)
	}
	got := runtest.SQLiteMap[int](t, filepath.Join(dir, "fwd.db"), "SELECT outcome, count(*) FROM fwd GROUP BY outcome")
	if got["inserted"] != 20 || len(got) != 1 {
		t.Errorf("forwarded outcomes %v, want all 20 inserted", got)
	}
}

// TestBranchingExample runs examples/branching in a copy: the resent
// orders take the "existed" branch, the one the insert refuses the
// default, and a second run moves nothing.
func TestBranchingExample(t *testing.T) {
	dir := t.TempDir()
	var src []byte
	for _, name := range []string{"branching.mqb", "orders.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", "branching", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "branching.mqb" {
			src = data
		}
	}
	p := plantest.Compile(t, string(src))
	// new_or_seen switches on the insert's outcome, which a replay can
	// change: at-least-once (a record can land in two branches).
	want := map[string]string{"new_or_seen": plan.AtLeastOnce, "by_region": plan.EffectivelyOnce}
	for _, r := range p.Routes {
		if r.Guarantee != want[r.Name] {
			t.Errorf("route %s: %s, want %s", r.Name, r.Guarantee, want[r.Name])
		}
	}
	st := runtest.RunIn(t, dir, p)
	if rs := st.Route("new_or_seen"); rs.In != 27 || rs.Out != 27 {
		t.Errorf("new_or_seen %+v, want in 27 out 27", rs)
	}
	if rs := st.Route("by_region"); rs.In != 27 || rs.Out != 26 || rs.DeadLettered != 1 {
		t.Errorf("by_region %+v, want in 27 out 26 dead-lettered 1", rs)
	}
	partIDs := func(sub string) []string {
		var ids []string
		files, _ := filepath.Glob(filepath.Join(dir, "out", sub, "part-*.jsonl"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var v struct {
					OrderID string `json:"order_id"`
				}
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, v.OrderID)
			}
		}
		sort.Strings(ids)
		return ids
	}
	db := filepath.Join(dir, "branching.db")
	all := plantest.SeqIDs("B-0", 1, 24)
	plantest.SameIDs(t, "orders", plantest.SQLiteIDs(t, db, "orders"), all)
	plantest.SameIDs(t, "new_orders", plantest.SQLiteIDs(t, db, "new_orders"), all)
	plantest.SameIDs(t, "out/new", partIDs("new"), all)
	plantest.SameIDs(t, "out/existed", partIDs("existed"), []string{"B-0003", "B-0007"})
	plantest.SameIDs(t, "out/unrouted", partIDs("unrouted"), []string{"B-0099"})
	n := len(plantest.SQLiteIDs(t, db, "eu_orders")) + len(plantest.SQLiteIDs(t, db, "us_orders")) + len(plantest.SQLiteIDs(t, db, "apac_orders"))
	if n != 26 {
		t.Errorf("region tables hold %d orders, want 26", n)
	}
	st = runtest.RunIn(t, dir, p)
	for _, rs := range st.Routes {
		if rs.In != 0 {
			t.Errorf("second run: route %s read %d records", rs.Name, rs.In)
		}
	}
}

const branchPremiseSrc = `
route keyed {
  guarantee effectively_once
  from file { path = "in.jsonl" }
  id payload.id
  to switch {
    on = payload.kind
    case "a" {
      to fanout {
        to sql {
          url          = "sqlite://out.db"
          insert_query = "INSERT INTO a (id, n) VALUES (${meta[\"mqb.id\"]}, ${payload.n}) ON CONFLICT DO NOTHING"
        }
      }
    }
    default {
      to file {
        path    = "rest"
        name_by = source_position
      }
    }
  }
}
`

// TestPremiseInsideBranches: the compiler's premise about a table written
// two branches deep (a fanout inside a switch), which the plan does not
// create, is checked against the table before the first record, through
// the branches: without the unique index the route is refused; with it
// the route runs.
func TestPremiseInsideBranches(t *testing.T) {
	for _, tc := range []struct {
		name, table string
		ok          bool
	}{
		{"no key", "CREATE TABLE a (id TEXT, n INTEGER)", false},
		{"primary key", "CREATE TABLE a (id TEXT PRIMARY KEY, n INTEGER)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plantest.WriteLines(t, filepath.Join(dir, "in.jsonl"), `{"id":"x1","kind":"a","n":1}`, `{"id":"x2","kind":"b","n":2}`)
			plantest.SQLiteExec(t, filepath.Join(dir, "out.db"), tc.table)
			p := plantest.Compile(t, branchPremiseSrc)
			if r := p.Routes[0]; r.Guarantee != plan.EffectivelyOnce || !premiseKinds(r.Premises, plan.PremiseUniqueKey, plan.PremiseNoTriggers) {
				t.Fatalf("route %s with premises %+v, want effectively-once resting on one unique key and no triggers", r.Guarantee, r.Premises)
			}
			if !checkOnePremise(t, p, dir, "table a", tc.ok) {
				return
			}
			st := runtest.RunIn(t, dir, p).Route("keyed")
			if st.In != 2 || st.Out != 2 {
				t.Errorf("stats %+v, want in 2 out 2", st)
			}
			plantest.SameIDs(t, "table a", plantest.SQLiteIDs(t, filepath.Join(dir, "out.db"), "a"), []string{"x1"})
		})
	}
}

// checkOnePremise checks the plan's one premise in dir and wants it to
// hold when ok; when it does not, the refusal must name what (a table,
// say) and Run must refuse the route before its first record. It reports
// whether the premise held.
func checkOnePremise(t *testing.T, p plan.Plan, dir, what string, ok bool) bool {
	t.Helper()
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
	var key *runtime.PremiseResult
	for _, r := range runtime.Check(context.Background(), p, opts) {
		switch {
		case r.Premise.Kind == plan.PremiseUniqueKey && key == nil:
			key = &r
		case !r.OK:
			t.Fatalf("check: %v, want only the unique-key premise to fail", r)
		}
	}
	if key == nil || key.OK != ok {
		t.Fatalf("check of the unique-key premise = %v, want ok %v", key, ok)
	}
	if ok {
		return true
	}
	if msg := key.Err.Error(); !strings.Contains(msg, "premise not met") || !strings.Contains(msg, what) {
		t.Errorf("refusal %q does not say the premise about %s failed", msg, what)
	}
	if _, err := runtime.Run(context.Background(), p, opts); err == nil || !strings.Contains(err.Error(), "refused before the first record") {
		t.Errorf("a route whose premise failed ran: %v", err)
	}
	return false
}

// premiseKinds reports whether ps are premises of exactly these kinds, in
// this order.
func premiseKinds(ps []plan.Premise, kinds ...string) bool {
	if len(ps) != len(kinds) {
		return false
	}
	for i, p := range ps {
		if p.Kind != kinds[i] {
			return false
		}
	}
	return true
}
