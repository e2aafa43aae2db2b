package main

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// killedRoute is an effectively-once file → SQLite route whose batches
// are reused once acked (id, dedup and filter keep payloads; the dlq is a
// file): records whose filter fails are dead-lettered.
const killedRoute = `route r {
  concurrency = 2, batch_size = 64
  from file { path = "in.jsonl" }
  id payload.id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  filter payload.qty > 12
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER NOT NULL, body TEXT NOT NULL) STRICT"
    insert_query = "INSERT INTO t (id, qty, body) VALUES (${meta[\"mqb.id\"]}, ${payload.qty}, ${payload}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// sqliteBodies reads t as id → body.
func sqliteBodies(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT id, body FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		out[id] = body
	}
	return out
}

// mqbc run is stopped again and again while it writes and commits, by
// SIGKILL and by SIGTERM, then run to the end: the table must equal a
// clean run's (every record once: the route is effectively-once), every
// dead letter must hold its own record (at least once: the dlq is
// at-least-once), a drained run must say it was interrupted (exit 3) and
// no run may exit 0 before the input is read.
func TestKilledAndDrainedRunsMatchACleanRun(t *testing.T) {
	if testing.Short() {
		t.Skip("kills mqbc run a dozen times")
	}
	const n = 150_000
	bad := func(i int) bool { return i%1001 == 7 }

	clean := t.TempDir()
	lines := recycledInput(t, filepath.Join(clean, "in.jsonl"), n, bad)
	write(t, clean, "r.mqb", killedRoute)
	if res := runIn(t, clean, "run", "r.mqb"); res.code != exitOK {
		t.Fatalf("clean run: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	want := sqliteBodies(t, filepath.Join(clean, "out.db"))

	dir := t.TempDir()
	recycledInput(t, filepath.Join(dir, "in.jsonl"), n, bad)
	write(t, dir, "r.mqb", killedRoute)
	rng := rand.New(rand.NewPCG(11, 3))
	db := filepath.Join(dir, "out.db")
	for i := range 12 {
		cmd, out, errb := startRun(t, dir, "run", "r.mqb")
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		// Wait for the run to write, then a little more: the signal
		// lands while batches are written and positions committed.
		before := sqliteCountOK(db)
		waitUntil(20*time.Second, func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			return sqliteCountOK(db) > before
		})
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		sig := syscall.SIGKILL
		if i%3 == 2 {
			sig = syscall.SIGTERM
		}
		cmd.Process.Signal(sig)
		<-exited
		code := cmd.ProcessState.ExitCode()
		switch {
		case code == exitOK:
			t.Logf("run %d ended before its %v", i, sig)
		case sig == syscall.SIGTERM && code != exitInterrupted:
			t.Fatalf("run %d: exit %d after SIGTERM, want %d\nstdout:\n%s\nstderr:\n%s", i, code, exitInterrupted, out.String(), errb.String())
		case sig == syscall.SIGKILL && code != -1:
			t.Fatalf("run %d: exit %d after SIGKILL\nstderr:\n%s", i, code, errb.String())
		}
		if code == exitOK {
			break
		}
	}
	res := runIn(t, dir, "run", "r.mqb")
	if res.code != exitOK {
		t.Fatalf("last run: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	got := sqliteBodies(t, db)
	if len(got) != len(want) {
		t.Errorf("table has %d rows, a clean run's %d", len(got), len(want))
	}
	missing := 0
	for id, body := range want {
		if got[id] != body {
			if missing++; missing <= 5 {
				t.Errorf("row %s: %q, a clean run has %q", id, got[id], body)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d rows differ from a clean run's", missing)
	}
	dlq := checkEnvelopes(t, filepath.Join(dir, "dlq.jsonl"), lines, "", false)
	for i := range n {
		if bad(i) && !dlq[uint64(i)] {
			t.Errorf("record %d failed its filter and is not in the dlq", i)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint("last run: ", res.stdout, res.stderr))
	}
}
