package postgrescdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

const cdcWarehouseUpsert = `ON CONFLICT (id) DO UPDATE SET amount = excluded.amount, body = excluded.body,
	lsn = excluded.lsn, deleted = excluded.deleted WHERE excluded.lsn > wh.lsn`

func cdcPlan(e plantest.Env, url, slot string, extra map[string]plan.Value) plan.Plan {
	src := map[string]plan.Value{"url": plantest.Str(url), "publication": plantest.Str("mqb_pub"), "slot_name": plantest.Str(slot)}
	for k, v := range extra {
		src[k] = v
	}
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "postgres_cdc", Attrs: src},
		plantest.DLQFile("n1", e.DLQ, ""),
		{ID: "n2", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url": plantest.Str(url),
			"insert_query": plantest.Tmpl(plantest.Lit("INSERT INTO wh (id, amount, body, lsn, deleted) VALUES ("), plantest.Ex("payload.id"), plantest.Lit(", "),
				plantest.Ex("payload.amount"), plantest.Lit(", "), plantest.Ex("payload.body"), plantest.Lit(", "), plantest.Ex(`meta["postgres.lsn"]`), plantest.Lit(", "),
				plantest.Ex(`meta["postgres.operation"] == "delete"`), plantest.Lit(") "+cdcWarehouseUpsert))}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "cdc", Guarantee: plan.EffectivelyOnce,
		Concurrency: 1, BatchSize: 200, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
}

// cdcDB prepares the source table, its publication and the warehouse.
func cdcDB(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	for _, q := range []string{
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, body TEXT)`,
		`CREATE TABLE wh (id INTEGER PRIMARY KEY, amount INTEGER, body TEXT, lsn BIGINT NOT NULL, deleted BOOLEAN NOT NULL)`,
		`CREATE PUBLICATION mqb_pub FOR TABLE orders`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// createSlot creates the route's replication slot before the first
// change, as for a route set up ahead of its traffic.
func createSlot(t *testing.T, c *pgx.Conn, name string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, name); err != nil {
		t.Fatal(err)
	}
}

// cdcWorkloadInBackground runs cdcWorkload on a connection of its own (the
// test's is used by the checks) and sends how many changes it made.
func cdcWorkloadInBackground(t *testing.T, url string, n int, seed uint64, pace time.Duration) <-chan int {
	changes := make(chan int, 1)
	go func() {
		wc, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Error(err)
			changes <- 0
			return
		}
		defer wc.Close(context.Background())
		changes <- cdcWorkload(t, wc, n, seed, pace)
	}()
	return changes
}

// cdcWorkload runs n operations on orders: inserts, updates and deletes,
// mostly one per transaction, some several keys to a transaction.
func cdcWorkload(t *testing.T, c *pgx.Conn, n int, seed uint64, pace time.Duration) (changes int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 1))
	var live []int
	next := 0
	for i := 0; i < n; {
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		used := map[int]bool{}
		for k := 0; k < 1+rng.IntN(3) && i < n; k++ {
			i++
			switch r := rng.IntN(10); {
			case r < 5 || len(live) < 10:
				_, err = tx.Exec(ctx, `INSERT INTO orders VALUES ($1, $2, $3)`, next, rng.IntN(1000), fmt.Sprintf("order %d", next))
				live = append(live, next)
				used[next] = true
				next++
			case r < 8:
				id := live[rng.IntN(len(live))]
				if used[id] {
					continue
				}
				used[id] = true
				_, err = tx.Exec(ctx, `UPDATE orders SET amount = amount + 1, body = $2 WHERE id = $1`, id, fmt.Sprintf("updated at %d", i))
			default:
				j := rng.IntN(len(live))
				id := live[j]
				if used[id] {
					continue
				}
				used[id] = true
				live = append(live[:j], live[j+1:]...)
				_, err = tx.Exec(ctx, `DELETE FROM orders WHERE id = $1`, id)
			}
			if err != nil {
				t.Error(err)
				tx.Rollback(ctx)
				return
			}
			changes++
		}
		if err := tx.Commit(ctx); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(pace)
	}
	return changes
}

// cdcDiff compares orders with the live rows of wh; "" when they agree.
func cdcDiff(t *testing.T, url string) string {
	t.Helper()
	read := func(q string) []string {
		return plantest.PGQuery(t, url, q, func(t *testing.T, rows plantest.Rows) []string {
			var out []string
			for rows.Next() {
				var id, amount int
				var body string
				if err := rows.Scan(&id, &amount, &body); err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%d/%d/%s", id, amount, body))
			}
			sort.Strings(out)
			return out
		})
	}
	want := read(`SELECT id, amount, body FROM orders`)
	got := read(`SELECT id, amount, body FROM wh WHERE NOT deleted`)
	if strings.Join(want, "\n") == strings.Join(got, "\n") {
		return ""
	}
	w, g := map[string]bool{}, map[string]bool{}
	for _, x := range want {
		w[x] = true
	}
	for _, x := range got {
		g[x] = true
	}
	var miss, extra []string
	for x := range w {
		if !g[x] {
			miss = append(miss, x)
		}
	}
	for x := range g {
		if !w[x] {
			extra = append(extra, x)
		}
	}
	sort.Strings(miss)
	sort.Strings(extra)
	return fmt.Sprintf("source has %d rows, warehouse %d live; missing %.300v; extra %.300v", len(want), len(got), miss, extra)
}

func waitConverged(t *testing.T, url string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		d := cdcDiff(t, url)
		if d == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("warehouse did not converge: %s", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSlot waits for the route to create its slot: changes made before
// it exists are not in the stream.
func waitSlot(t *testing.T, c *pgx.Conn, slot string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := c.QueryRow(context.Background(), `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %s not created", slot)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Changes stream into the warehouse while they happen; a graceful stop
// advances the slot, so the next run replays nothing.
func TestPostgresCDCToWarehouse(t *testing.T) {
	url := testsrv.Postgres(t)
	c := cdcDB(t, url)
	e := plantest.NewEnv(t)
	p := cdcPlan(e, url, "mqb_slot", nil)
	r := runtest.Start(context.Background(), p, runtest.Options())
	waitSlot(t, c, "mqb_slot")
	cdcWorkload(t, c, 2000, 1, 0)
	waitConverged(t, url, time.Minute)
	time.Sleep(300 * time.Millisecond)
	rs := r.Stop(t).Route("cdc")
	runtest.CheckCounts(t, rs)
	t.Logf("first run: %+v", rs)
	if rs.Out == 0 || rs.DeadLettered+rs.Errors != 0 {
		t.Errorf("first run: %+v", rs)
	}
	// Nothing acked is delivered again after a graceful stop.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	st, err := runtime.Run(ctx, p, runtest.Options())
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Route("cdc"); rs.In != 0 {
		t.Errorf("run after a graceful stop read %d changes again", rs.In)
	}
	// Meta and ids as the spec gives them.
	var lsn int64
	if err := c.QueryRow(context.Background(), `SELECT max(lsn) FROM wh`).Scan(&lsn); err != nil || lsn <= 0 {
		t.Errorf("warehouse lsn %d (%v)", lsn, err)
	}
}

// The mqb process is SIGKILLed repeatedly while changes stream; a last run
// catches up and the warehouse converges to the source table: replayed
// changes never move a row back (excluded.lsn > wh.lsn).
func TestCrashPostgresCDCConverges(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	url := testsrv.Postgres(t)
	c := cdcDB(t, url)
	createSlot(t, c, "mqb_crash_slot")
	e := plantest.NewEnv(t)
	p := cdcPlan(e, url, "mqb_crash_slot", map[string]plan.Value{"checkpoint_store": plantest.Str("pebble://" + e.State)})
	planPath := plantest.WriteCrashPlan(t, p, e.Dir)
	work := cdcWorkloadInBackground(t, url, 4000, 2, time.Millisecond)
	plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: 4, Wait: plantest.KillWaits(7, 7, 300*time.Millisecond, 900*time.Millisecond), MayEnd: true})
	<-work
	final := plantest.StartHelper(t, bin, planPath)
	waitConverged(t, url, time.Minute)
	time.Sleep(500 * time.Millisecond)
	var st runtime.Stats
	final.Stop(t, &st)
	rs := st.Route("cdc")
	runtest.CheckCounts(t, rs)
	t.Logf("final run: %+v", rs)
	if rs.DeadLettered+rs.Errors != 0 {
		t.Errorf("final run dropped records: %+v", rs)
	}
	if d := cdcDiff(t, url); d != "" {
		t.Errorf("after the final run: %s", d)
	}
}

// postgres_cdc into part files named by source position: the process is
// SIGKILLed while changes stream; in the end every change is in exactly one
// part (a replay names the same positions, which are skipped as covered).
func TestCrashPostgresCDCParts(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	url := testsrv.Postgres(t)
	c := cdcDB(t, url)
	createSlot(t, c, "mqb_parts_slot")
	e := plantest.NewEnv(t)
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "postgres_cdc", Attrs: map[string]plan.Value{"url": plantest.Str(url),
			"publication": plantest.Str("mqb_pub"), "slot_name": plantest.Str("mqb_parts_slot"), "checkpoint_store": plantest.Str("pebble://" + e.State)}},
		{ID: "n1", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{"path": plantest.Str(e.Parts), "name_by": plantest.Enum("source_position")}},
	}
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "cdcparts", Guarantee: plan.EffectivelyOnce,
		Concurrency: 2, BatchSize: 100, Nodes: nodes, Edges: plantest.Chain(nodes)}}}
	planPath := plantest.WriteCrashPlan(t, p, e.Dir)
	changes := cdcWorkloadInBackground(t, url, 3000, 3, time.Millisecond)
	lines := func() map[string]int {
		seen := map[string]int{}
		entries, _ := os.ReadDir(e.Parts)
		for _, en := range entries {
			if !strings.HasPrefix(en.Name(), "part-") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(e.Parts, en.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
				seen[l]++
			}
		}
		return seen
	}
	plantest.KillRuns(t, bin, planPath, plantest.CrashSchedule{Kills: 4, Wait: plantest.KillWaits(9, 9, 300*time.Millisecond, 700*time.Millisecond), MayEnd: true,
		Progress: func() string { return fmt.Sprintf("(%d distinct changes in parts)", len(lines())) }})
	n := <-changes
	final := plantest.StartHelper(t, bin, planPath)
	plantest.WaitFor(func() bool { return len(lines()) >= n }, time.Minute, 100*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	final.Stop(t, &runtime.Stats{})
	seen := lines()
	twice := 0
	for _, k := range seen {
		if k > 1 {
			twice++
		}
	}
	if len(seen) != n || twice > 0 {
		t.Errorf("parts hold %d distinct changes (%d more than once), want each of %d once", len(seen), twice, n)
	}
}

// The spec's known edge: a key changed twice in one transaction gives two
// records with the transaction's commit LSN, hence one message_id.
func TestPostgresCDCSameKeyTwiceInOneTransaction(t *testing.T) {
	url := testsrv.Postgres(t)
	c := cdcDB(t, url)
	ctx := context.Background()
	if _, err := c.Exec(ctx, `CREATE TABLE ev (n SERIAL, msg TEXT, lsn BIGINT, op TEXT, amount INTEGER)`); err != nil {
		t.Fatal(err)
	}
	e := plantest.NewEnv(t)
	p := cdcPlan(e, url, "mqb_edge_slot", nil)
	sink := &p.Routes[0].Nodes[len(p.Routes[0].Nodes)-1]
	sink.Attrs["insert_query"] = plantest.Tmpl(plantest.Lit("INSERT INTO ev (msg, lsn, op, amount) VALUES ("), plantest.Ex("message_id"), plantest.Lit(", "),
		plantest.Ex(`meta["postgres.lsn"]`), plantest.Lit(", "), plantest.Ex(`meta["postgres.operation"]`), plantest.Lit(", "), plantest.Ex("payload.amount"), plantest.Lit(")"))
	r := runtest.Start(ctx, p, runtest.Options())
	waitSlot(t, c, "mqb_edge_slot")
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Exec(ctx, `INSERT INTO orders VALUES (1, 1, 'first')`)
	tx.Exec(ctx, `UPDATE orders SET amount = 2 WHERE id = 1`)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		msg, op string
		lsn     int64
		amount  int
	}
	var got []ev
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		got = plantest.PGQuery(t, url, `SELECT msg, op, lsn, amount FROM ev ORDER BY n`, func(t *testing.T, rows plantest.Rows) (out []ev) {
			for rows.Next() {
				var e ev
				rows.Scan(&e.msg, &e.op, &e.lsn, &e.amount)
				out = append(out, e)
			}
			return out
		})
	}
	r.Stop(t)
	if len(got) != 2 || got[0].op != "insert" || got[1].op != "update" || got[1].amount != 2 {
		t.Fatalf("events %+v, want the insert then the update", got)
	}
	if got[0].msg != got[1].msg || got[0].lsn != got[1].lsn {
		t.Errorf("events %+v: want one message_id and one lsn (the commit's) for both", got)
	}
}

// TestPostgresCDCSlotGoneStops: a slot dropped while the route is down
// takes the changes after the route's checkpoint with it, and a slot made
// again would start at the server's current position. A route that
// resumes from a checkpoint stops instead, naming the slot and the
// checkpoint's LSN, and reads nothing.
func TestPostgresCDCSlotGoneStops(t *testing.T) {
	url := testsrv.Postgres(t)
	c := cdcDB(t, url)
	createSlot(t, c, "mqb_gone_slot")
	e := plantest.NewEnv(t)
	p := cdcPlan(e, url, "mqb_gone_slot", map[string]plan.Value{"checkpoint_store": plantest.Str("pebble://" + e.State)})
	r := runtest.Start(context.Background(), p, runtest.Options())
	cdcWorkload(t, c, 200, 3, 0)
	waitConverged(t, url, time.Minute)
	time.Sleep(300 * time.Millisecond)
	r.Stop(t)

	ctx := context.Background()
	if _, err := c.Exec(ctx, `SELECT pg_drop_replication_slot('mqb_gone_slot')`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO orders SELECT 100000 + i, i, 'while no slot' FROM generate_series(1, 50) i`); err != nil {
		t.Fatal(err) // changes no slot holds
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := runtime.Run(rctx, p, runtest.Options())
	if rctx.Err() != nil {
		t.Fatalf("the route ran on for 20s after its slot was dropped (err %v)", err)
	}
	for _, w := range []string{"slot mqb_gone_slot is gone", "where the route's checkpoint stands", "mqbc state reset"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not say %q", err, w)
		}
	}
	if rs := st.Route("cdc"); rs.In != 0 {
		t.Errorf("read %d changes after the slot was dropped, want 0", rs.In)
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'mqb_gone_slot'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d slots named mqb_gone_slot after the refused start (%v), want 0: none made again", n, err)
	}
}
