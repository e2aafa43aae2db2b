package sql

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mqbc "github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// copyInput is a generated input for a bulk_copy route: lines with ids
// o-0, o-1, …, with a string amount (a type error the server refuses) at
// every typeErrEvery-th line and broken JSON at every brokenEvery-th (0:
// none). ids are the lines the table must hold, bad the positions the
// DLQ must.
type copyInput struct {
	path string
	ids  []string
	bad  map[uint64]bool
}

func genCopyInput(t *testing.T, dir string, n, typeErrEvery, brokenEvery int) copyInput {
	t.Helper()
	in := copyInput{path: filepath.Join(dir, "orders.jsonl"), bad: map[uint64]bool{}}
	var b strings.Builder
	for i := range n {
		switch {
		case typeErrEvery > 0 && i%typeErrEvery == typeErrEvery/2:
			fmt.Fprintf(&b, `{"order_id": "t-%d", "amount": "twelve", "body": "type error"}`+"\n", i)
			in.bad[uint64(i)] = true
		case brokenEvery > 0 && i%brokenEvery == brokenEvery/3:
			fmt.Fprintf(&b, `{"order_id": "x-%d", "amount": 1, "body": broken`+"\n", i)
			in.bad[uint64(i)] = true
		default:
			id := fmt.Sprintf("o-%d", i)
			fmt.Fprintf(&b, `{"order_id": %q, "amount": %d, "body": "order\tnumber %d"}`+"\n", id, i, i)
			in.ids = append(in.ids, id)
		}
	}
	if err := os.WriteFile(in.path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

const copyOrdersDDL = `CREATE TABLE IF NOT EXISTS orders (id TEXT, amount INTEGER NOT NULL, body TEXT)`

// bulkCopyPlan compiles the route orders: in → dlq → bulk_copy into
// table orders (no key) at url, its position under dir, and checks the
// compiler's verdict: a plain COPY writes a replayed row again, so
// at-least-once.
func bulkCopyPlan(t *testing.T, dir string, in copyInput, url string, concurrency int) plan.Plan {
	t.Helper()
	src := fmt.Sprintf(`route orders {
  concurrency = %d
  batch_size = 512
  from file { path = %q, checkpoint_store = %q }
  retry { attempts = 20 }
  dlq { to file { path = %q } }
  to sql {
    url          = %q
    create_table = %q
    insert_query = "INSERT INTO orders (id, amount, body) VALUES (${payload.order_id}, ${payload.amount}, ${payload.body})"
    bulk_copy    = true
  }
}
`, concurrency, in.path, "pebble://"+filepath.Join(dir, "state"), filepath.Join(dir, "dlq.jsonl"), url, copyOrdersDDL)
	p, diags := mqbc.CompileSources([]mqbc.Source{{Name: "orders.mqb", Src: []byte(src)}})
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	if r := p.Routes[0]; r.Guarantee != plan.AtLeastOnce {
		t.Fatalf("verdict %s, want at-least-once: %s", r.Guarantee, strings.Join(r.Reasons, "; "))
	}
	return *p
}

// pgIDCounts is how many rows table orders holds of each id.
func pgIDCounts(t *testing.T, url string) map[string]int {
	t.Helper()
	return pgQuery(t, url, `SELECT id, count(*) FROM orders GROUP BY id`, func(t *testing.T, rows sqlRows) map[string]int {
		out := map[string]int{}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			out[id] = n
		}
		return out
	})
}

// checkCopied asserts the table holds every id of in at least once (once
// each when exactly), nothing else, and the DLQ every bad line. It
// returns how many rows are repeats.
func checkCopied(t *testing.T, url, dlq string, in copyInput, exactly bool) (repeats int) {
	t.Helper()
	got := pgIDCounts(t, url)
	missing := 0
	for _, id := range in.ids {
		n := got[id]
		if n == 0 {
			if missing++; missing <= 5 {
				t.Errorf("id %s missing from the table", id)
			}
		}
		if n > 1 {
			repeats += n - 1
			if exactly {
				t.Errorf("id %s stored %d times", id, n)
			}
		}
		delete(got, id)
	}
	if missing > 0 {
		t.Errorf("%d of %d ids missing: rows lost", missing, len(in.ids))
	}
	for id := range got {
		t.Errorf("id %s in the table, not in the input", id)
	}
	checkDLQ(t, readDLQ(t, dlq), in.bad, false)
	return repeats
}

// A bulk_copy route commits its rows at the route's commit, in a
// transaction it keeps open between: the PostgreSQL server restarting
// loses that transaction, and the route must stop with an error rather
// than retry (its acked rows are gone). Nothing is lost: the position
// was not committed past them, and a rerun writes them again.
func TestPostgresBulkCopyServerRestart(t *testing.T) {
	srv := testsrv.NewPostgres(t)

	// The route's commit never comes before the restart: every row
	// written is in the open transaction when the server goes.
	t.Run("open transaction lost", func(t *testing.T) {
		url := srv.NewDatabase(t).URL
		dir := t.TempDir()
		in := genCopyInput(t, dir, 300000, 0, 0)
		p := bulkCopyPlan(t, dir, in, url, 1)
		opts := testOptions(t)
		opts.CommitInterval = time.Hour
		done := make(chan error, 1)
		go func() {
			_, err := runtime.Run(context.Background(), p, opts)
			done <- err
		}()
		// A backend with a transaction ID has written rows.
		writing := func() bool {
			return pgQuery(t, url, `SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()`,
				func(t *testing.T, rows sqlRows) (n int) {
					for rows.Next() {
						rows.Scan(&n)
					}
					return n
				}) > 0
		}
		if !waitFor(writing, time.Minute, 10*time.Millisecond) {
			t.Fatal("no transaction wrote within a minute")
		}
		time.Sleep(200 * time.Millisecond)
		srv.Restart(t, time.Second)
		err := <-done
		if err == nil || !strings.Contains(err.Error(), "open transaction") || !strings.Contains(err.Error(), "lost") {
			t.Fatalf("run through the restart: err %v, want the route stopped saying the open transaction is lost", err)
		}
		t.Logf("stopped: %v", err)
		if n := pgCount(t, url); n != 0 {
			t.Errorf("%d rows committed before the route's commit, want 0", n)
		}
		rs := runRoute(t, p, "orders")
		t.Logf("rerun: %+v", rs)
		checkCopied(t, url, filepath.Join(dir, "dlq.jsonl"), in, true)
	})

	// The restart lands mid-run, between commits: the route stops (or,
	// when no acked row was in an open transaction at that moment, its
	// retry rides through), and a rerun resumes at the last commit.
	t.Run("mid-run", func(t *testing.T) {
		url := srv.NewDatabase(t).URL
		dir := t.TempDir()
		in := genCopyInput(t, dir, 300000, 40000, 25000)
		p := bulkCopyPlan(t, dir, in, url, 2)
		pgQuery(t, url, copyOrdersDDL, func(*testing.T, sqlRows) any { return nil })
		done := make(chan error, 1)
		go func() {
			_, err := runtime.Run(context.Background(), p, testOptions(t))
			done <- err
		}()
		count := func() int { return pgCount(t, url) }
		if !waitFor(func() bool { return count() >= len(in.ids)/5 }, time.Minute, 20*time.Millisecond) {
			t.Fatal("fewer than a fifth of the rows within a minute")
		}
		before := count()
		srv.Restart(t, time.Second)
		err := <-done
		if before >= len(in.ids) {
			t.Fatalf("the run was over before the restart (%d rows)", before)
		}
		if err != nil {
			if !strings.Contains(err.Error(), "lost") {
				t.Errorf("stopped with %v, want it to say the transaction is lost", err)
			}
			t.Logf("restarted after %d rows; stopped: %v; %d rows committed", before, err, count())
			rs := runRoute(t, p, "orders")
			t.Logf("rerun: %+v", rs)
		} else {
			t.Logf("restarted after %d rows; rode through (no acked row in an open transaction)", before)
		}
		repeats := checkCopied(t, url, filepath.Join(dir, "dlq.jsonl"), in, false)
		t.Logf("%d repeated rows (at-least-once)", repeats)
	})
}

// The mqb process is SIGKILLed at random moments of a bulk_copy route
// that commits at the route's commit, then a last run finishes. The
// verdict is at-least-once (a plain COPY writes a replayed row again):
// every valid row must be in the table, none lost; repeats are counted.
// A Sync that did not commit the open transaction before the position is
// saved would lose the rows of every kill.
func TestCrashPostgresBulkCopyCommitOnSync(t *testing.T) {
	bin := buildCrashHelper(t)
	url := testsrv.Postgres(t)
	dir := t.TempDir()
	const seed = 47
	in := genCopyInput(t, dir, 300000, 30000, 20000)
	p := bulkCopyPlan(t, dir, in, url, 2)
	// The table exists before the first kill, which may come before the
	// first run created it (the progress line counts its rows).
	pgQuery(t, url, copyOrdersDDL, func(*testing.T, sqlRows) any { return nil })
	planPath := writeCrashPlan(t, p, dir)
	killRuns(t, bin, planPath, crashSchedule{Kills: 5, Wait: killWaits(seed, 5, 200*time.Millisecond, 600*time.Millisecond), MayEnd: true,
		Progress: func() string { return fmt.Sprintf("(%d rows committed)", pgCount(t, url)) }})
	rs := finishRun(t, startHelper(t, bin, planPath)).Route("orders")
	checkCounts(t, rs)
	t.Logf("final run %+v", rs)
	repeats := checkCopied(t, url, filepath.Join(dir, "dlq.jsonl"), in, false)
	t.Logf("%d repeated rows of %d (at-least-once)", repeats, len(in.ids))
}
