//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// cdcRow is a row of the CDC source table as the sink should end holding it.
type cdcRow struct {
	amount int64
	body   string
}

// cdcUpsertRoute streams table kv through slot into a SQLite table with
// the upsert the postgres_cdc source documents: by key, guarded by
// postgres.lsn with >=, a delete written as a tombstone (deleted = 1) so
// that an older change replayed after it cannot bring the row back.
// Concurrency 1: postgres.lsn is the commit LSN, shared by every change of
// a transaction, so two changes of one key in one transaction tie; >= lets
// the later one win, and a replay repeats a transaction's changes in
// their order, so the row ends at the transaction's last change, as the
// source table does (the spec's "the sink still converges to the final row
// state"). A guard with > would keep the first. At concurrency 2 either
// change could land last, and the compiler says at-least-once.
func cdcUpsertRoute(url, slot string) string {
	return fmt.Sprintf(`route chaos {
  batch_size  = 50
  concurrency = 1
  from postgres_cdc { url = %q, publication = "mqb_kv", slot_name = %q, checkpoint_store = "pebble://state/cdc" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS kv (id INTEGER PRIMARY KEY, amount INTEGER, body TEXT, lsn INTEGER NOT NULL, deleted INTEGER NOT NULL)"
    insert_query = """INSERT INTO kv (id, amount, body, lsn, deleted) VALUES (${payload.id}, ${payload.amount}, ${payload.body}, ${int(meta["postgres.lsn"])}, ${meta["postgres.operation"] == "delete" ? 1 : 0})
      ON CONFLICT (id) DO UPDATE SET amount = excluded.amount, body = excluded.body, lsn = excluded.lsn, deleted = excluded.deleted
      WHERE excluded.lsn >= kv.lsn"""
  }
}
`, url, slot)
}

// cdcWorkload writes transactions into kv: inserts of new keys, updates of
// live keys (some key updated twice in one transaction, the spec's known
// edge) and deletes, each transaction 1 to 6 changes.
type cdcWorkload struct {
	db   *pgDB
	rng  *rand.Rand
	next int64
	live []int64
	// twice counts transactions that changed one key twice.
	twice, txns, changes int
	// tied holds the keys whose last transaction changed them more than
	// once: the sink must hold that transaction's last change of the key.
	tied map[int64]bool
}

func (w *cdcWorkload) txn() error {
	ctx := context.Background()
	tx, err := w.db.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var failed error
	touched := map[int64]int{}
	exec := func(q string, id int64, args ...any) {
		if _, err := tx.Exec(ctx, q, append([]any{id}, args...)...); err != nil && failed == nil {
			failed = fmt.Errorf("%s: %w", q, err)
		}
		touched[id]++
		w.changes++
	}
	for range 1 + w.rng.IntN(6) {
		n := w.rng.IntN(100)
		switch {
		case n < 35 || len(w.live) < 10:
			id := w.next
			w.next++
			exec(`INSERT INTO kv (id, amount, body) VALUES ($1, $2, $3)`, id, w.rng.Int64N(1e6), fmt.Sprintf("v0 of %d", id))
			w.live = append(w.live, id)
		case n < 70:
			id := w.live[w.rng.IntN(len(w.live))]
			exec(`UPDATE kv SET amount = $2, body = $3 WHERE id = $1`, id, w.rng.Int64N(1e6), fmt.Sprintf("u%d of %d", w.changes, id))
		case n < 85:
			// The same key changed twice in one transaction: both
			// changes carry the transaction's commit LSN.
			id := w.live[w.rng.IntN(len(w.live))]
			exec(`UPDATE kv SET amount = $2, body = $3 WHERE id = $1`, id, w.rng.Int64N(1e6), fmt.Sprintf("a%d of %d", w.changes, id))
			exec(`UPDATE kv SET amount = $2, body = $3 WHERE id = $1`, id, w.rng.Int64N(1e6), fmt.Sprintf("b%d of %d", w.changes, id))
			w.twice++
		default:
			i := w.rng.IntN(len(w.live))
			exec(`DELETE FROM kv WHERE id = $1`, w.live[i])
			w.live = append(w.live[:i], w.live[i+1:]...)
		}
	}
	if failed != nil {
		return failed
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	for id, n := range touched {
		w.tied[id] = n > 1
	}
	w.txns++
	return nil
}

// sourceRows reads kv as it stands.
func (w *cdcWorkload) sourceRows(t *testing.T) map[int64]cdcRow {
	t.Helper()
	rows, err := w.db.conn.Query(context.Background(), `SELECT id, amount, body FROM kv`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]cdcRow{}
	for rows.Next() {
		var id int64
		var r cdcRow
		if err := rows.Scan(&id, &r.amount, &r.body); err != nil {
			t.Fatal(err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sinkRows reads the live (not deleted) rows of the SQLite sink in dir,
// and whether it holds key id at all.
func sinkRows(t *testing.T, dir string, sentinel int64) (map[int64]cdcRow, bool) {
	t.Helper()
	path := filepath.Join(dir, "out.db")
	if _, err := os.Stat(path); err != nil {
		return nil, false
	}
	h := openSQLite(t, path)
	defer h.Close()
	rows, err := h.Query(`SELECT id, amount, body, deleted FROM kv`)
	if err != nil {
		return nil, false // not made yet
	}
	defer rows.Close()
	out := map[int64]cdcRow{}
	seen := false
	for rows.Next() {
		var id, deleted int64
		var amount *int64
		var body *string
		if err := rows.Scan(&id, &amount, &body, &deleted); err != nil {
			t.Fatal(err)
		}
		seen = seen || id == sentinel
		if deleted == 0 && amount != nil && body != nil {
			out[id] = cdcRow{*amount, *body}
		}
	}
	return out, seen
}

// drainTo runs mqbc on dir until the sink holds the sentinel row, written
// after every other change, then stops it with SIGTERM.
func drainTo(t *testing.T, dir string, sentinel int64) {
	t.Helper()
	r := startMqbc(t, dir, nil)
	r.waitStarted(t)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, ok := sinkRows(t, dir, sentinel); ok {
			break
		}
		if time.Now().After(deadline) {
			r.cmd.Process.Kill()
			<-r.exited
			t.Fatalf("the sink in %s does not hold the last change after 5 minutes\n%s", dir, tail(r.stderrText(), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.waitExit(t, time.Minute, "the drained run did not stop on SIGTERM"); err != nil {
		t.Fatalf("final run: %v\n%s%s", err, r.stdout.String(), tail(r.stderrText(), 3000))
	}
}

// diffRows describes how got differs from want, at most 10 keys.
func diffRows(want, got map[int64]cdcRow) (string, int) {
	var ids []int64
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			ids = append(ids, id)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b strings.Builder
	for i, id := range ids {
		if i == 10 {
			fmt.Fprintf(&b, "  … and %d more\n", len(ids)-10)
			break
		}
		w, wok := want[id]
		g, gok := got[id]
		fmt.Fprintf(&b, "  id %d: source %v (%v), sink %v (%v)\n", id, w, wok, g, gok)
	}
	return b.String(), len(ids)
}

// TestChaosCDCUpdatesDeletes drives postgres_cdc with inserts, updates
// (some key twice in one transaction) and deletes while the route into an
// LSN-guarded SQLite upsert is SIGKILLed again and again; after the final
// drain the sink's live rows must equal the source table, and equal what
// a clean run (another slot, no kills) wrote.
func TestChaosCDCUpdatesDeletes(t *testing.T) {
	kills := envInt("CHAOS_KILLS", 20)
	seed := uint64(envInt("CHAOS_SEED", 8))
	url := testsrv.Postgres(t)
	db := openPostgres(t, url, `CREATE TABLE kv (id BIGINT PRIMARY KEY, amount BIGINT NOT NULL, body TEXT NOT NULL)`,
		`CREATE PUBLICATION mqb_kv FOR TABLE kv`,
		`SELECT pg_create_logical_replication_slot('mqb_kill', 'pgoutput')`,
		`SELECT pg_create_logical_replication_slot('mqb_clean', 'pgoutput')`)
	killed, clean := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(killed, "chaos.mqb"), cdcUpsertRoute(url, "mqb_kill"))
	writeFile(t, filepath.Join(clean, "chaos.mqb"), cdcUpsertRoute(url, "mqb_clean"))
	out, err := exec.Command(mqbcBin, "build", filepath.Join(killed, "chaos.mqb")).CombinedOutput()
	if err != nil {
		t.Fatalf("mqbc build: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), effectivelyOnce) {
		t.Fatalf("mqbc build does not prove the route effectively-once:\n%s", out)
	}

	// The workload writes while the runs go: kills land between
	// and inside the transactions the route reads.
	w := &cdcWorkload{db: db, rng: rand.New(rand.NewPCG(seed, 2)), tied: map[int64]bool{}}
	rng := rand.New(rand.NewPCG(seed, 0x8c4a05))
	window := 300 * time.Millisecond
	runs, hits := 0, 0
	for hits < kills && runs < 4*kills {
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 150 {
				if err := w.txn(); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		runs++
		hit, worked, _ := killRun(t, killed, nil, rng, window)
		<-done
		if hit {
			hits++
		} else {
			window = max(time.Millisecond, worked*9/10)
		}
	}
	// The sentinel, committed after every other change, tells a drain
	// that the route has read everything.
	sentinel := int64(-1)
	if _, err := w.db.conn.Exec(context.Background(), `INSERT INTO kv (id, amount, body) VALUES (-1, 0, 'sentinel')`); err != nil {
		t.Fatal(err)
	}
	drainTo(t, killed, sentinel)
	drainTo(t, clean, sentinel)
	for _, d := range []string{killed, clean} {
		if data, err := os.ReadFile(filepath.Join(d, "dlq.jsonl")); err == nil && len(data) > 0 {
			t.Errorf("records reached the DLQ: %.500s", data)
		}
	}

	want := w.sourceRows(t)
	got, _ := sinkRows(t, killed, sentinel)
	ref, _ := sinkRows(t, clean, sentinel)
	t.Logf("%d runs, %d kills hit a running route; %d transactions, %d changes, %d with one key changed twice; %d live rows",
		runs, hits, w.txns, w.changes, w.twice, len(want))
	if hits < kills {
		t.Errorf("only %d kills hit a running route", hits)
	}
	if d, n := diffRows(ref, got); n > 0 {
		t.Errorf("the killed run's sink differs from the clean run's in %d keys:\n%s", n, d)
	}
	// Every key is as the source holds it, those whose last transaction
	// changed them twice (the spec's known edge) included: the >= guard
	// lets that transaction's last change of the key win.
	tiedKeys := 0
	for _, tied := range w.tied {
		if tied {
			tiedKeys++
		}
	}
	t.Logf("%d keys' last transaction changed them twice", tiedKeys)
	if tiedKeys == 0 {
		t.Error("no key's last transaction changed it twice: the known edge went untested")
	}
	if d, n := diffRows(want, got); n > 0 {
		t.Errorf("the killed run's sink differs from the source table in %d keys:\n%s", n, d)
	}
}
