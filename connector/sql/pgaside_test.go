package sql

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mqbc "github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Two sinks writing one table at once (two routes, or two instances of
// one), each holding in its filter the keys the other now writes first
// by COPY: each sink's part 1 (pgaside.go) may wait for the other's COPY,
// whose sink waits for its own part 1, or each COPY for the other's part
// 1, open until that sink's COPY ends: cycles the server cannot see.
// The waiting transaction gives up its lock wait, the batch goes by the
// staged statement, and both writes finish with every row in the table.
// (Without the limit on the main transaction, 3 of 15 runs hung.)
func TestPostgresSplitAsideOtherWriter(t *testing.T) {
	url := testsrv.Postgres(t)
	const table = "aside_other_writer"
	sink := func() runtime.Sink {
		s, err := newServerSinkForTest(t, map[string]plan.Value{
			"url":          strV(url),
			"create_table": strV("CREATE TABLE IF NOT EXISTS " + table + " (id TEXT PRIMARY KEY, amount BIGINT, body TEXT)"),
			"insert_query": tmplV(lit("INSERT INTO "+table+" (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
				ex("payload.amount"), lit(", "), ex("payload.body"), lit(") ON CONFLICT (id) DO NOTHING"))})
		if err != nil {
			t.Fatal(err)
		}
		if sp := s.(*sqlSink).server.split; sp == nil || !sp.aside {
			t.Fatal("the sink would not run part 1 beside its COPY")
		}
		return s
	}
	x, y := sink(), sink()
	records := func(first string, prefix string, n int) []*runtime.Record {
		recs := []*runtime.Record{splitRec{first, int64(-1), nil}.record()}
		for i := range n {
			recs = append(recs, splitRec{fmt.Sprint(prefix, i), int64(i), nil}.record())
		}
		return recs
	}
	write := func(ctx context.Context, s runtime.Sink, recs []*runtime.Record) error {
		var err error
		for range 3 { // a deadlock the server breaks is the batch's error, written again
			if err = s.Write(ctx, recs); err == nil {
				return nil
			}
		}
		return err
	}
	for round := range 8 {
		j, k := fmt.Sprintf("j%d-", round), fmt.Sprintf("k%d-", round)
		// x has written the j keys, y the k keys; then the rows go.
		if err := x.Write(context.Background(), records("xj", j, 600)[1:]); err != nil {
			t.Fatal(err)
		}
		if err := y.Write(context.Background(), records("yk", k, 600)[1:]); err != nil {
			t.Fatal(err)
		}
		if err := pgExec(url, "DELETE FROM "+table); err != nil {
			t.Fatal(err)
		}
		// x copies k…0 and sends the j keys by part 1; y the other way.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var wg sync.WaitGroup
		var errs [2]error
		for n, w := range []struct {
			s   runtime.Sink
			rec []*runtime.Record
		}{{x, records(k+"0", j, 600)}, {y, records(j+"0", k, 600)}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[n] = write(ctx, w.s, w.rec)
			}()
		}
		wg.Wait()
		cancel()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if got := pgQuery(t, url, "SELECT count(*)::text, '' FROM "+table, scanPairs[string]); len(got) != 1 || !hasKey(got, "1200") {
			t.Fatalf("round %d: %v rows, want 1200", round, got)
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// Part 1 beside the COPY under SIGKILL: a file → PostgreSQL upsert whose
// later lines repeat earlier keys about half the time, so each write
// sends thousands of rows by part 1 on its second connection, killed
// five times, then run to the end and once more without its position.
// Part 1 may have committed when a kill takes the main transaction; the
// table must end with the first row of every key, as a clean run leaves.
func TestCrashPostgresSplitAside(t *testing.T) {
	bin := buildCrashHelper(t)
	url := testsrv.Postgres(t)
	dir := t.TempDir()
	input := filepath.Join(dir, "orders.jsonl")
	rng := rand.New(rand.NewPCG(29, 1))
	want := map[string]string{}
	var b strings.Builder
	for i := range 300000 {
		id := fmt.Sprint("k-", i)
		if i >= 30000 && rng.IntN(2) == 0 {
			id = fmt.Sprint("k-", rng.IntN(i))
		}
		body := fmt.Sprint("line-", i)
		if _, ok := want[id]; !ok {
			want[id] = body
		}
		fmt.Fprintf(&b, "{\"id\":%q,\"body\":%q}\n", id, body)
	}
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`route orders {
  from file { path = %q, checkpoint_store = %q }
  to sql {
    url = %q
    create_table = "CREATE TABLE IF NOT EXISTS aside_crash (id TEXT PRIMARY KEY, body TEXT)"
    insert_query = "INSERT INTO aside_crash (id, body) VALUES (${payload.id}, ${payload.body}) ON CONFLICT (id) DO NOTHING"
  }
}
`, input, "pebble://"+filepath.Join(dir, "state"), url)
	p, diags := mqbc.CompileSources([]mqbc.Source{{Name: "orders.mqb", Src: []byte(src)}})
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	if r := p.Routes[0]; r.Guarantee != plan.EffectivelyOnce {
		t.Fatalf("verdict %s, want %s: %s", r.Guarantee, plan.EffectivelyOnce, strings.Join(r.Reasons, "; "))
	}
	rows := func() map[string]string {
		return pgQuery(t, url, "SELECT id, body FROM aside_crash", scanPairs[string])
	}
	check := func(when string) {
		got := rows()
		bad := 0
		for k, v := range want {
			if got[k] != v {
				bad++
			}
		}
		if bad > 0 || len(got) != len(want) {
			t.Errorf("%s: %d rows, %d keys with a row other than a clean run's (%d rows)", when, len(got), bad, len(want))
		}
	}
	planPath := writeCrashPlan(t, *p, dir)
	pgQuery(t, url, "CREATE TABLE IF NOT EXISTS aside_crash (id TEXT PRIMARY KEY, body TEXT)", func(*testing.T, sqlRows) any { return nil })
	killRuns(t, bin, planPath, crashSchedule{Kills: 5, Wait: killWaits(29, 5, 150*time.Millisecond, 500*time.Millisecond), MayEnd: true,
		Progress: func() string { return fmt.Sprintf("(%d rows)", len(rows())) }})
	finishRun(t, startHelper(t, bin, planPath))
	check("after kills")
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	finishRun(t, startHelper(t, bin, planPath))
	check("after a replay of everything")
}
