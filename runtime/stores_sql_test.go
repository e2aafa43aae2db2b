package runtime_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// Two instances of one route read the same input at once, sharing a
// PostgreSQL dedup store; the sink table has no unique constraint, so only
// the store keeps a record from landing twice.
func TestTwoInstancesSharePostgresDedup(t *testing.T) {
	srv := testsrv.SharedPostgres(t)
	url := srv.NewDatabase(t).URL
	base := newTestEnv(t)
	ds := genDataset(t, base.input, 40000, 17)
	const ddl = `CREATE TABLE IF NOT EXISTS orders (id TEXT, amount INTEGER NOT NULL, body TEXT)`
	var wg sync.WaitGroup
	stats := make([]runtime.RouteStats, 2)
	errs := make([]error, 2)
	for i := range 2 {
		e := base
		e.state = filepath.Join(base.dir, "state", string(rune('a'+i)))
		e.dlq = filepath.Join(base.dir, "dlq-"+string(rune('a'+i))+".jsonl")
		p := sqlServerPlan(e, url, ddl, "", 256, 2, true)
		nodes := p.Routes[0].Nodes
		nodes[2].Attrs["store"] = strV(url) // the dedup step
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := runtime.Run(context.Background(), p, testOptions(t))
			stats[i], errs[i] = st.Route("orders"), err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		checkCounts(t, stats[i])
		t.Logf("instance %d: %+v", i, stats[i])
	}
	if stats[0].Out == 0 || stats[1].Out == 0 {
		t.Logf("one instance wrote nothing: the test did not race")
	}
	got := pgQuery(t, url, `SELECT id, amount FROM orders`, scanOrderRows)
	checkOrderRows(t, got, ds, false)
	dlq := readDLQ(t, filepath.Join(base.dir, "dlq-a.jsonl"))
	for p, n := range readDLQ(t, filepath.Join(base.dir, "dlq-b.jsonl")) {
		dlq[p] += n
	}
	checkDLQ(t, dlq, ds.Bad, false)
}

// A route whose checkpoint store is PostgreSQL resumes from it; a second
// instance started on the same route takes it over, and the first one's
// next checkpoint is refused (fencing), failing that route.
func TestPostgresCheckpointStoreFencesRoute(t *testing.T) {
	url := testsrv.Postgres(t)
	e := newTestEnv(t)
	ds := genDataset(t, e.input, 3000, 4)
	p := sqlServerPlan(e, url, pgOrdersDDL, "ON CONFLICT (id) DO NOTHING", 256, 1, false)
	p.Routes[0].Nodes[0].Attrs["checkpoint_store"] = strV(url)
	st, err := runtime.Run(context.Background(), p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Route("orders"); rs.Committed != int64(ds.Records) {
		t.Fatalf("committed %d of %d", rs.Committed, ds.Records)
	}
	// A second run reads nothing: the position came from PostgreSQL.
	st, err = runtime.Run(context.Background(), p, testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Route("orders"); rs.In != 0 {
		t.Errorf("second run read %d records, want 0", rs.In)
	}
	checkOrderRows(t, pgQuery(t, url, `SELECT id, amount FROM orders`, scanOrderRows), ds, true)

	// Fencing through the route's store: the route's handle loses the
	// route to a newer owner and its next save is refused.
	n := &plan.Node{Kind: "file", Role: plan.RoleSource, Attrs: map[string]plan.Value{"checkpoint_store": strV(url)}}
	older, err := runtime.OpenCheckpointStore("orders", n, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	pos, _, err := older.Load("orders")
	if err != nil {
		t.Fatal(err)
	}
	newer, err := runtime.OpenCheckpointStore("orders", n, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, _, err := newer.Load("orders"); err != nil {
		t.Fatal(err)
	}
	err = older.Save("orders", pos)
	if !errors.Is(err, checkpoint.ErrFenced) || !strings.Contains(err.Error(), "stop this instance") {
		t.Fatalf("stale save: %v, want refused as fenced", err)
	}
	if err := newer.Save("orders", pos); err != nil {
		t.Fatal(err)
	}
}
