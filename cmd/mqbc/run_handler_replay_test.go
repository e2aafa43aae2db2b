package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// handlerReplayRoute is a handler whose plain INSERT leaves out v, which
// has a literal DEFAULT and is in the unique key (k, v): a repeat writes
// (k, 'x') again and fails on it. %s is the route's dlq block.
const handlerReplayRoute = `route r {
  batch_size = 16
  from file { path = "in.jsonl" }
  handle sql {
    url          = "sqlite://h.db"
    create_table = "CREATE TABLE IF NOT EXISTS log (k TEXT NOT NULL, v TEXT DEFAULT 'x', UNIQUE (k, v))"
    insert_query = "INSERT INTO log (k) VALUES (${payload.k})"
  }
  %s
  to sql {
    url          = "sqlite://out.db"
    insert_query = "INSERT INTO t (k) VALUES (${payload.k}) ON CONFLICT (k) DO NOTHING"
  }
}
`

// A handler whose replay fails on a unique key dead-letters the replayed
// record, and the sink after it never gets it: the compiler calls the
// route at-most-once (it said at-least-once while a unique key with a
// left-out column was taken as one a repeat cannot hit). The first run
// stops after the handler wrote some records and before the sink did,
// with the position before them: killed (SIGKILL) while the sink waits on
// a lock the test holds, or stopped by the sink refusing them (a trigger)
// with no dlq. The rerun over the same input, with the sink free and a
// dlq, replays them: the handler's INSERT fails on UNIQUE (k, v) for
// each, the dlq gets them all, the sink none.
func TestHandlerReplayFailsOnADefaultedUniqueColumn(t *testing.T) {
	const n = 40
	for _, stop := range []string{"killed", "sink refuses"} {
		t.Run(stop, func(t *testing.T) {
			dir := t.TempDir()
			var in strings.Builder
			for i := range n {
				fmt.Fprintf(&in, `{"k":"k%03d"}`+"\n", i)
			}
			write(t, dir, "in.jsonl", in.String())
			out, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "out.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			out.SetMaxOpenConns(1)
			for _, stmt := range []string{
				"PRAGMA journal_mode=WAL",
				"CREATE TABLE t (k TEXT PRIMARY KEY)",
				"CREATE TRIGGER refuse BEFORE INSERT ON t BEGIN SELECT RAISE(ABORT, 'not now'); END",
			} {
				if _, err := out.Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			hdb := filepath.Join(dir, "h.db")
			handledCount := func() int {
				d, err := sql.Open("sqlite3", "file:"+hdb+"?mode=ro")
				if err != nil {
					return 0
				}
				defer d.Close()
				var c int
				if d.QueryRow("SELECT count(*) FROM log").Scan(&c) != nil {
					return 0
				}
				return c
			}
			write(t, dir, "r.mqb", fmt.Sprintf(handlerReplayRoute, ""))
			switch stop {
			case "killed":
				if _, err := out.Exec("DROP TRIGGER refuse"); err != nil {
					t.Fatal(err)
				}
				// The sink's write waits on this lock (or gives up and
				// stops the route): either way it writes nothing.
				if _, err := out.Exec("BEGIN IMMEDIATE"); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(mqbcBin, "run", "r.mqb")
				cmd.Dir = dir
				var errb bytes.Buffer
				cmd.Stderr = &errb
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan struct{})
				go func() { cmd.Wait(); close(exited) }()
				if !waitUntil(20*time.Second, func() bool { return handledCount() > 0 }) {
					cmd.Process.Kill()
					<-exited
					t.Fatalf("the handler wrote nothing:\n%s", errb.String())
				}
				cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				if cmd.ProcessState.ExitCode() == exitOK {
					t.Fatalf("the run ended before it was killed:\n%s", errb.String())
				}
				if _, err := out.Exec("ROLLBACK"); err != nil {
					t.Fatal(err)
				}
			case "sink refuses":
				first := runIn(t, dir, "run", "r.mqb")
				if first.code != exitError || !strings.Contains(first.stderr, "not now") {
					t.Fatalf("first run: exit %d, want %d with the sink's refusal\nstdout:\n%s\nstderr:\n%s", first.code, exitError, first.stdout, first.stderr)
				}
				if _, err := out.Exec("DROP TRIGGER refuse"); err != nil {
					t.Fatal(err)
				}
			}
			handled := handledCount()
			if handled == 0 {
				t.Fatal("the handler wrote nothing before the run stopped")
			}
			if got := sqliteQueryInt(t, filepath.Join(dir, "out.db"), "SELECT count(*) FROM t"); got != 0 {
				t.Fatalf("the sink has %d records after the first run, want none", got)
			}
			if cp := checkpointRecord(t, dir); cp != 0 {
				t.Fatalf("checkpoint at record %d, though the sink wrote nothing", cp)
			}

			write(t, dir, "r.mqb", fmt.Sprintf(handlerReplayRoute, `dlq { to file { path = "dead.jsonl" } }`))
			build := runIn(t, dir, "build", "r.mqb", "-o", filepath.Join(dir, "plan.json"))
			verdict := build.stdout + build.stderr
			if build.code != exitOK || !strings.Contains(verdict, "r: at-most-once") || !strings.Contains(verdict, "handler sql: a replay fails on a unique key") {
				t.Fatalf("build: exit %d, want the route at-most-once for the handler's failing replay:\n%s", build.code, verdict)
			}
			rerun := runIn(t, dir, "run", "r.mqb")
			if rerun.code != exitOK {
				t.Fatalf("rerun: exit %d\nstdout:\n%s\nstderr:\n%s", rerun.code, rerun.stdout, rerun.stderr)
			}
			dead, err := os.ReadFile(filepath.Join(dir, "dead.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(dead)), "\n")
			if len(lines) != handled || !strings.Contains(lines[0], "UNIQUE constraint failed: log.k, log.v") {
				t.Fatalf("dlq has %d records, want the %d the handler wrote before, each refused on UNIQUE (k, v):\n%s", len(lines), handled, dead)
			}
			got := sqliteQueryInt(t, filepath.Join(dir, "out.db"), "SELECT count(*) FROM t")
			if got != n-handled {
				t.Errorf("the sink has %d records, want %d: the %d the handler dead-lettered on the replay never reach it", got, n-handled, handled)
			}
			if all := handledCount(); all != n {
				t.Errorf("the handler's table has %d rows, want %d", all, n)
			}
		})
	}
}

// A handler's premise is checked at start-up: create_table (IF NOT
// EXISTS) shows v nullable with no default, so the compiler proves the
// handler's replay cannot fail and the route at-least-once, resting on
// repeat_insertable; the table already there has v DEFAULT 'x', so mqbc
// run refuses the route before the first record, naming the key, and
// writes nothing.
func TestHandlerReplayPremiseRefusesAtStartup(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "in.jsonl", `{"k":"a"}`+"\n"+`{"k":"b"}`+"\n")
	h, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Exec("CREATE TABLE log (k TEXT, v TEXT DEFAULT 'x', UNIQUE (k, v))"); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "r.mqb", `route r {
  from file { path = "in.jsonl" }
  handle sql {
    url          = "sqlite://h.db"
    create_table = "CREATE TABLE IF NOT EXISTS log (k TEXT, v TEXT, UNIQUE (k, v))"
    insert_query = "INSERT INTO log (k) VALUES (${payload.k})"
  }
  to file { path = "out.jsonl" }
}
`)
	build := runIn(t, dir, "build", "r.mqb", "-o", filepath.Join(dir, "plan.json"))
	if verdict := build.stdout + build.stderr; build.code != exitOK || !strings.Contains(verdict, "r: at-least-once") || !strings.Contains(verdict, "table log has no unique index or constraint a repeat of the insert into columns (k) conflicts on") {
		t.Fatalf("build: exit %d, want at-least-once resting on the repeat_insertable premise:\n%s", build.code, verdict)
	}
	run := runIn(t, dir, "run", "r.mqb")
	if run.code == exitOK || !strings.Contains(run.stderr, "premise not met") || !strings.Contains(run.stderr, "v (left out, and its DEFAULT 'x'") {
		t.Fatalf("run: exit %d, want a refusal naming the defaulted column\nstdout:\n%s\nstderr:\n%s", run.code, run.stdout, run.stderr)
	}
	if n := sqliteQueryInt(t, filepath.Join(dir, "h.db"), "SELECT count(*) FROM log"); n != 0 {
		t.Errorf("the handler wrote %d rows before the refusal", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.jsonl")); err == nil {
		if b, _ := os.ReadFile(filepath.Join(dir, "out.jsonl")); len(b) > 0 {
			t.Errorf("the sink got records before the refusal: %s", b)
		}
	}
}
