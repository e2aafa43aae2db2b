package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// changedInputRoute is an effectively-once file → SQLite route.
const changedInputRoute = `route r {
  from file { path = "in.jsonl" }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER)"
    insert_query = "INSERT INTO t (id, qty) VALUES (${payload.id}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"
  }
}
`

func writeTagged(t *testing.T, path, tag string, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644) // in place: same inode
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(bw, `{"id":"%s%07d","qty":%d}`+"\n", tag, i, i%100)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// An input rewritten in place while a run consumes it (an export written
// over the path with `>`): the run went on reading the new content at the
// old offset, skipped every new record before it and exited 0 (on one
// try, 523,855 old records and 476,145 new ones landed, the new export's
// first 523,855 never). The run must stop non-zero without delivering a
// record of the new content, and after the state reset the rerun delivers
// every record of the new export.
func TestInputRewrittenWhileConsumed(t *testing.T) {
	dir := t.TempDir()
	const n = 600_000
	in := filepath.Join(dir, "in.jsonl")
	writeTagged(t, in, "a", n)
	write(t, dir, "r.mqb", changedInputRoute)

	cmd, out, errb := startRun(t, dir, "run", "r.mqb")
	db := filepath.Join(dir, "out.db")
	if !waitUntil(60*time.Second, func() bool { return sqliteCountOK(db) > 0 }) {
		cmd.Process.Kill()
		t.Fatalf("no row landed in 60 s\nstderr:\n%s", errb.String())
	}
	// Hold the run still while the export is written over its input.
	cmd.Process.Signal(syscall.SIGSTOP)
	writeTagged(t, in, "b", n)
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitError {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitError, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "changed while it was read") {
		t.Errorf("stderr does not say the input changed:\n%s", errb.String())
	}
	if got := sqliteQueryInt(t, db, "SELECT count(*) FROM t WHERE id LIKE 'b%'"); got != 0 {
		t.Errorf("%d records of the new content delivered by the run that read it at the old offset", got)
	}

	rerun := runIn(t, dir, "run", "r.mqb")
	if rerun.code == exitOK {
		t.Fatalf("the rerun resumed a checkpoint of the old content\nstderr:\n%s", rerun.stderr)
	}
	if r := runIn(t, dir, "state", "reset", "--yes", "r.mqb", "r"); r.code != exitOK {
		t.Fatalf("state reset: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	rerun = runIn(t, dir, "run", "r.mqb")
	if rerun.code != exitOK {
		t.Fatalf("rerun after the reset: exit %d\nstdout:\n%s\nstderr:\n%s", rerun.code, rerun.stdout, rerun.stderr)
	}
	if got := sqliteQueryInt(t, db, "SELECT count(*) FROM t WHERE id LIKE 'b%'"); got != n {
		t.Errorf("%d records of the new export delivered after the reset, want %d", got, n)
	}
}
