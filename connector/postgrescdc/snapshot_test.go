package postgrescdc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Rows the snapshot tests put in the tables before the route starts: the
// workload's order ids start at 0, these far above.
const (
	snapOrders = 5000
	snapLines  = 300
	snapBase   = 1000000
)

// snapshotDB prepares orders (cdcDB) and lines (a composite primary key),
// both published, and fills them with rows the route finds already there.
func snapshotDB(t *testing.T, url string, orders int) *pgx.Conn {
	t.Helper()
	c := cdcDB(t, url)
	for _, q := range []string{
		`CREATE TABLE lines (order_id INTEGER, n INTEGER, qty INTEGER NOT NULL, note TEXT, PRIMARY KEY (order_id, n))`,
		`ALTER PUBLICATION mqb_pub ADD TABLE lines`,
		fmt.Sprintf(`INSERT INTO orders SELECT g, g %% 997, 'before ' || g FROM generate_series(%d, %d) g`, snapBase, snapBase+orders-1),
		fmt.Sprintf(`INSERT INTO lines SELECT %d + g / 3, g %% 3, g, CASE WHEN g %% 5 = 0 THEN NULL ELSE 'line ' || g END FROM generate_series(0, %d) g`, snapBase, snapLines-1),
	} {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// touchSnapshotRows changes rows the snapshot also reads (an update and a
// delete in orders, an update in lines) and says how many changes it made.
func touchSnapshotRows(t *testing.T, url string) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer c.Close(ctx)
	n := 0
	for _, q := range []string{
		fmt.Sprintf(`UPDATE orders SET amount = amount + 1000, body = 'touched' WHERE id >= %d AND id %% 50 = 0`, snapBase),
		fmt.Sprintf(`DELETE FROM orders WHERE id >= %d AND id %% 50 = 7`, snapBase),
		`UPDATE lines SET qty = qty + 1 WHERE n = 1 AND order_id % 10 = 0`,
	} {
		tag, err := c.Exec(ctx, q)
		if err != nil {
			t.Error(err)
			return n
		}
		n += int(tag.RowsAffected())
	}
	return n
}

// snapshotSource is the route's source text.
func snapshotSource(url, slot, state string) string {
	return fmt.Sprintf(`from postgres_cdc { url = %q, publication = "mqb_pub", slot_name = %q, snapshot = true, checkpoint_store = %q }`,
		url, slot, "pebble://"+state)
}

// sourceRows is every row of orders and lines, each as its table and its
// row as canonical JSON, sorted.
func sourceRows(t *testing.T, url string) []string {
	t.Helper()
	return plantest.PGQuery(t, url, `SELECT 'orders', row_to_json(o)::text FROM orders o UNION ALL SELECT 'lines', row_to_json(l)::text FROM lines l`,
		func(t *testing.T, rows plantest.Rows) []string {
			var out []string
			for rows.Next() {
				var tbl, body string
				if err := rows.Scan(&tbl, &body); err != nil {
					t.Fatal(err)
				}
				out = append(out, tbl+" "+canonJSON(t, body))
			}
			sort.Strings(out)
			return out
		})
}

func canonJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sqliteQuery runs query on the SQLite database at db, opened read-only;
// nil rows (no error) while the table does not exist.
func sqliteQuery(t *testing.T, db, query string) [][]string {
	t.Helper()
	conn, err := sql.Open(plantest.SQLiteDriver, "file:"+db+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(query)
	if err != nil {
		return nil
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out
}

func sqliteCount(t *testing.T, db, query string) int {
	t.Helper()
	rows := sqliteQuery(t, db, query)
	if len(rows) == 0 {
		return 0
	}
	var n int
	fmt.Sscan(rows[0][0], &n)
	return n
}

// The rows already in the published tables arrive first, once each, as
// they were when the slot was created (changes made while the snapshot is
// read are not in it), then every change made after, once each; applied
// in order they rebuild both tables. A row both in the snapshot and
// changed later gives two records with different ids: both are events.
func TestPostgresCDCSnapshotThenStream(t *testing.T) {
	url := testsrv.Postgres(t)
	c := snapshotDB(t, url, snapOrders)
	want0 := sourceRows(t, url)
	e := plantest.NewEnv(t)
	db := filepath.Join(e.Dir, "ev.db")
	p := plantest.Compile(t, fmt.Sprintf(`route snap {
  batch_size = 300
  %s
  to sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS ev (n INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, tbl TEXT NOT NULL, k TEXT NOT NULL, op TEXT NOT NULL, lsn INTEGER NOT NULL, body TEXT NOT NULL)"
    insert_query = "INSERT INTO ev (id, tbl, k, op, lsn, body) VALUES (${message_id}, ${meta[\"postgres.table\"]}, ${meta[\"postgres.key\"]}, ${meta[\"postgres.operation\"]}, ${meta[\"postgres.lsn\"]}, ${payload})"
  }
}
`, snapshotSource(url, "mqb_snap_slot", e.State), "sqlite://"+db))
	r := runtest.Start(context.Background(), p, runtest.Options())
	// Change rows once the snapshot is being read: the slot is
	// consistent then, so what follows is streamed, not in the snapshot.
	if !runtest.WaitFor(func() bool { return sqliteCount(t, db, `SELECT count(*) FROM ev`) > 0 }, time.Minute, 20*time.Millisecond) {
		t.Fatal("no snapshot row written")
	}
	changes := touchSnapshotRows(t, url) + cdcWorkload(t, c, 1500, 11, 0)
	total := snapOrders + snapLines + changes
	if !runtest.WaitFor(func() bool { return sqliteCount(t, db, `SELECT count(*) FROM ev`) >= total }, 2*time.Minute, 100*time.Millisecond) {
		t.Fatalf("%d events, want %d", sqliteCount(t, db, `SELECT count(*) FROM ev`), total)
	}
	time.Sleep(300 * time.Millisecond)
	rs := r.Stop(t).Route("snap")
	runtest.CheckCounts(t, rs)
	if rs.DeadLettered+rs.Errors != 0 {
		t.Errorf("run: %+v", rs)
	}
	evs := sqliteQuery(t, db, `SELECT id, tbl, k, op, lsn, body FROM ev ORDER BY n`)
	if len(evs) != total {
		t.Errorf("%d events, want %d (%d snapshot rows, %d changes)", len(evs), total, snapOrders+snapLines, changes)
	}
	ids := map[string]int{}
	var snapshot []string
	state := map[string]string{}
	var lastSnapLSN uint64
	streamed := false
	for _, ev := range evs {
		id, tbl, k, op, body := ev[0], ev[1], ev[2], ev[3], ev[5]
		lsn, err := strconv.ParseUint(ev[4], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids[id]++
		switch {
		case op == opSnapshot:
			if streamed {
				t.Fatalf("snapshot row %s %s after a streamed change", tbl, k)
			}
			if lastSnapLSN != 0 && lsn != lastSnapLSN {
				t.Errorf("snapshot rows with lsn %d and %d, want one", lastSnapLSN, lsn)
			}
			lastSnapLSN = lsn
			snapshot = append(snapshot, tbl+" "+canonJSON(t, body))
			state[tbl+" "+k] = canonJSON(t, body)
		default:
			streamed = true
			if lsn <= lastSnapLSN {
				t.Errorf("change %s %s %s at lsn %d, not above the snapshot's %d", op, tbl, k, lsn, lastSnapLSN)
			}
			if op == "delete" {
				delete(state, tbl+" "+k)
			} else {
				state[tbl+" "+k] = canonJSON(t, body)
			}
		}
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("message_id %s delivered %d times", id, n)
			break
		}
	}
	sort.Strings(snapshot)
	if strings.Join(snapshot, "\n") != strings.Join(want0, "\n") {
		t.Errorf("the snapshot holds %d rows, not the %d there were when the slot was created", len(snapshot), len(want0))
	}
	var got []string
	for k, body := range state {
		tbl, _, _ := strings.Cut(k, " ")
		got = append(got, tbl+" "+body)
	}
	sort.Strings(got)
	if want := sourceRows(t, url); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events applied in order give %d rows, the tables hold %d", len(got), len(want))
	}
	// A graceful stop after the snapshot: the next run streams on and
	// reads nothing again.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	st, err := runtime.Run(ctx, p, runtest.Options())
	if err != nil {
		t.Fatal(err)
	}
	if rs := st.Route("snap"); rs.In != 0 {
		t.Errorf("run after a graceful stop read %d records again", rs.In)
	}
}

// A published table without a primary key is refused before anything is
// read, naming the table: the plan's primary_key premise, checked at
// start-up, before the slot is created.
func TestPostgresCDCSnapshotRefusesTableWithoutKey(t *testing.T) {
	url := testsrv.Postgres(t)
	c := cdcDB(t, url)
	ctx := context.Background()
	for _, q := range []string{`CREATE TABLE notes (body TEXT)`, `ALTER PUBLICATION mqb_pub ADD TABLE notes`} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	e := plantest.NewEnv(t)
	p := plantest.Compile(t, fmt.Sprintf("route snap {\n  %s\n  to file { path = %q }\n}\n", snapshotSource(url, "mqb_nokey_slot", e.State), filepath.Join(e.Dir, "out.jsonl")))
	_, err := runtime.Run(ctx, p, runtest.Options())
	// The plan's primary_key premise refuses it, before Open.
	if err == nil || !strings.Contains(err.Error(), "public.notes has no primary key") || !strings.Contains(err.Error(), "premise not met") {
		t.Fatalf("err %v, want it to name public.notes as without a primary key", err)
	}
	t.Log(err)
	var slots int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'mqb_nokey_slot'`).Scan(&slots); err != nil || slots != 0 {
		t.Errorf("%d slots (%v): the refused route created its slot", slots, err)
	}
}

// snapshotWarehousePlan writes every change into SQLite keyed by table and
// key, a row replaced only by a change of a later LSN, deletes kept as
// tombstones.
func snapshotWarehousePlan(t *testing.T, url, slot, state, db string) plan.Plan {
	t.Helper()
	return plantest.Compile(t, fmt.Sprintf(`route snapwh {
  guarantee effectively_once
  batch_size = 200
  %s
  to sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS wh (tbl TEXT NOT NULL, k TEXT NOT NULL, lsn INTEGER NOT NULL, body TEXT NOT NULL, deleted BOOLEAN NOT NULL, PRIMARY KEY (tbl, k))"
    insert_query = "INSERT INTO wh (tbl, k, lsn, body, deleted) VALUES (${meta[\"postgres.table\"]}, ${meta[\"postgres.key\"]}, ${meta[\"postgres.lsn\"]}, ${payload}, ${meta[\"postgres.operation\"] == \"delete\"}) ON CONFLICT (tbl, k) DO UPDATE SET lsn = excluded.lsn, body = excluded.body, deleted = excluded.deleted WHERE excluded.lsn > wh.lsn"
  }
}
`, snapshotSource(url, slot, state), "sqlite://"+db))
}

// warehouseRows is the live rows of wh as sourceRows gives the tables.
func warehouseRows(t *testing.T, db string) []string {
	t.Helper()
	var out []string
	for _, r := range sqliteQuery(t, db, `SELECT tbl, body FROM wh WHERE NOT deleted`) {
		out = append(out, r[0]+" "+canonJSON(t, r[1]))
	}
	sort.Strings(out)
	return out
}

// The mqb process is SIGKILLed while it reads the snapshot (struck by
// rows written, so every kill lands part-way through it on any machine)
// and then while changes stream, the workload changing rows all along; a
// last run catches up, and the warehouse equals the tables, as a clean
// run's does. A kill mid-snapshot loses the exported snapshot: the rest is
// read in a new one, and the stream from the slot's start brings every
// row read late back to its latest state.
func TestCrashPostgresCDCSnapshot(t *testing.T) {
	bin := runtest.BuildCrashHelper(t)
	url := testsrv.Postgres(t)
	const orders = 20000
	c := snapshotDB(t, url, orders)
	e := plantest.NewEnv(t)
	db := filepath.Join(e.Dir, "wh.db")
	planPath := plantest.WriteCrashPlan(t, snapshotWarehousePlan(t, url, "mqb_snapcrash_slot", e.State, db), e.Dir)
	rows := func() int { return sqliteCount(t, db, `SELECT count(*) FROM wh`) }
	// streamed is how many rows a streamed change wrote (an LSN above the
	// snapshot rows').
	streamed := func() int { return sqliteCount(t, db, `SELECT count(*) FROM wh WHERE lsn > (SELECT min(lsn) FROM wh)`) }
	snapTotal := orders + snapLines
	rng := rand.New(rand.NewPCG(181, 3))
	var work <-chan int
	midSnapshot, midStream := 0, 0
	for i := range 5 {
		r := plantest.StartHelper(t, bin, planPath)
		if i == 0 {
			waitSlot(t, c, "mqb_snapcrash_slot")
			work = cdcWorkloadInBackground(t, url, 4000, 12, 5*time.Millisecond)
		}
		if i < 3 {
			// Mid-snapshot: once a further 5–20% of its rows are written.
			target := rows() + snapTotal*(5+rng.IntN(16))/100
			plantest.WaitFor(func() bool { return rows() >= target || len(r.Exited) > 0 }, 3*time.Minute, 2*time.Millisecond)
		} else {
			// Mid-stream: once a further 100–400 rows took a change.
			target := streamed() + 100 + rng.IntN(300)
			plantest.WaitFor(func() bool { return streamed() >= target || len(r.Exited) > 0 }, time.Minute, 2*time.Millisecond)
		}
		if err := r.Cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Fatal(err)
		}
		<-r.Exited
		n, m := rows(), streamed()
		switch {
		case n < snapTotal:
			midSnapshot++
		case m > 0 && len(work) == 0:
			midStream++ // the workload still running
		}
		t.Logf("run %d killed with %d warehouse rows (snapshot %d rows), %d changed by the stream %s", i, n, snapTotal, m, strings.TrimSpace(r.Stderr.String()))
	}
	if midSnapshot == 0 || midStream == 0 {
		t.Errorf("%d kills struck while the snapshot was being read, %d while changes streamed: want both", midSnapshot, midStream)
	}
	changes := <-work + touchSnapshotRows(t, url)
	t.Logf("%d changes made while the route ran", changes)
	final := plantest.StartHelper(t, bin, planPath)
	want := sourceRows(t, url)
	converged := plantest.WaitFor(func() bool { return strings.Join(warehouseRows(t, db), "\n") == strings.Join(want, "\n") }, 2*time.Minute, 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	var st runtime.Stats
	final.Stop(t, &st)
	rs := st.Route("snapwh")
	runtest.CheckCounts(t, rs)
	t.Logf("final run: %+v", rs)
	if rs.DeadLettered+rs.Errors != 0 {
		t.Errorf("final run dropped records: %+v", rs)
	}
	if got := warehouseRows(t, db); !converged || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warehouse holds %d live rows, the tables %d: %s", len(got), len(want), firstDiff(got, want))
	}
}

// firstDiff names a row one list has and the other lacks.
func firstDiff(got, want []string) string {
	g, w := map[string]bool{}, map[string]bool{}
	for _, x := range got {
		g[x] = true
	}
	for _, x := range want {
		w[x] = true
	}
	for _, x := range want {
		if !g[x] {
			return "missing " + x
		}
	}
	for _, x := range got {
		if !w[x] {
			return "extra " + x
		}
	}
	return "same rows"
}
