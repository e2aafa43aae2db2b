package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noLossRoute is file → id → dedup → filter → SQLite. %s is where a dlq
// block goes (empty: the route has none).
const noLossRoute = `route r {
  from file { path = "in.jsonl" }
  id payload.id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  filter payload.qty > 5
  %s
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER)"
    insert_query = "INSERT INTO t (id, qty) VALUES (${meta[\"mqb.id\"]}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"
  }
}
`

type runResult struct {
	code           int
	stdout, stderr string
}

func runIn(t *testing.T, dir string, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(mqbcBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return runResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

func sqliteQueryInt(t *testing.T, path, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A record that fails a step with no dlq stops the route with a non-zero
// exit before its position is committed, and gives its dedup key back:
// fixing the route (here: adding a dlq) and rerunning delivers every
// record, the failed ones included. Before, the first run exited 0 with
// "errors 2" and the rerun read nothing.
func TestFailedRecordWithoutDLQIsNotLost(t *testing.T) {
	for _, failAt := range [][]int{{40, 170}, {1}, {200}} {
		t.Run(fmt.Sprint(failAt), func(t *testing.T) {
			dir := t.TempDir()
			var in strings.Builder
			bad := map[int]bool{}
			for _, i := range failAt {
				bad[i] = true
			}
			wantRows := 0
			for i := 1; i <= 200; i++ {
				if bad[i] {
					fmt.Fprintf(&in, `{"id":"o%03d","qty":"x"}`+"\n", i)
					continue
				}
				fmt.Fprintf(&in, `{"id":"o%03d","qty":%d}`+"\n", i, i)
				if i > 5 {
					wantRows++
				}
			}
			write(t, dir, "in.jsonl", in.String())
			write(t, dir, "r.mqb", fmt.Sprintf(noLossRoute, ""))

			first := runIn(t, dir, "run", "r.mqb")
			if first.code != exitError {
				t.Fatalf("first run exit %d, want %d (a record failed with no dlq)\nstdout:\n%s\nstderr:\n%s", first.code, exitError, first.stdout, first.stderr)
			}
			for _, want := range []string{"record(s) failed and the route declares no dlq", fmt.Sprintf("record %d:", failAt[0]-1), "rerun, which resumes at that record"} {
				if !strings.Contains(first.stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, first.stderr)
				}
			}

			write(t, dir, "r.mqb", fmt.Sprintf(noLossRoute, `dlq { to file { path = "dlq.jsonl" } }`))
			second := runIn(t, dir, "run", "r.mqb")
			if second.code != exitOK {
				t.Fatalf("rerun exit %d\nstdout:\n%s\nstderr:\n%s", second.code, second.stdout, second.stderr)
			}
			if got := sqliteQueryInt(t, filepath.Join(dir, "out.db"), "SELECT count(*) FROM t"); got != wantRows {
				t.Errorf("table has %d rows, want %d", got, wantRows)
			}
			dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(string(dlq), "\n"); got != len(failAt) {
				t.Errorf("dlq has %d lines, want %d (the failed records, each once):\n%s", got, len(failAt), dlq)
			}
		})
	}
}

var interruptedRE = regexp.MustCompile(`(?m)^r: interrupted at record (\d+) \(the records before it are committed\); a rerun resumes there$`)

// SIGTERM drains a run of a finite file: it says where it stopped, exits
// 3, and the rerun delivers the rest. A drain of an endless source (a
// subscribed file) is a clean stop: exit 0, no such line.
func TestInterruptedRunSaysSoAndExitsNonZero(t *testing.T) {
	dir := t.TempDir()
	const n = 600_000
	f, err := os.Create(filepath.Join(dir, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(bw, `{"id":"o%07d","qty":%d}`+"\n", i, i%100+6)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, dir, "r.mqb", fmt.Sprintf(noLossRoute, ""))

	cmd, out, errb := startRun(t, dir, "run", "r.mqb")
	// Stop it once rows land, well before all have.
	db := filepath.Join(dir, "out.db")
	if !waitUntil(30*time.Second, func() bool { return sqliteCountOK(db) > 0 }) {
		cmd.Process.Kill()
		t.Fatalf("no row landed in 30 s\nstderr:\n%s", errb.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d after SIGTERM, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, out.String(), errb.String())
	}
	m := interruptedRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no interrupted line in stdout:\n%s", out.String())
	}
	at, _ := strconv.Atoi(m[1])
	if at <= 0 || at >= n {
		t.Errorf("interrupted at record %d of %d", at, n)
	}

	rerun := runIn(t, dir, "run", "r.mqb")
	if rerun.code != exitOK || interruptedRE.MatchString(rerun.stdout) {
		t.Fatalf("rerun exit %d\nstdout:\n%s\nstderr:\n%s", rerun.code, rerun.stdout, rerun.stderr)
	}
	if got := sqliteQueryInt(t, db, "SELECT count(*) FROM t"); got != n {
		t.Errorf("table has %d rows after the rerun, want %d", got, n)
	}

	// An endless source drained is a clean stop.
	sub := t.TempDir()
	write(t, sub, "in.jsonl", "")
	write(t, sub, "r.mqb", strings.Replace(fmt.Sprintf(noLossRoute, ""), `path = "in.jsonl"`, `path = "in.jsonl", mode = subscribe`, 1))
	cmd, out, errb = startRun(t, sub, "run", "r.mqb")
	// A subscription reads what is appended after it started: append a
	// record until one lands.
	i := 0
	if !waitUntil(30*time.Second, func() bool {
		if i++; i%10 == 0 {
			af, err := os.OpenFile(filepath.Join(sub, "in.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			if err == nil {
				fmt.Fprintf(af, `{"id":"a%d","qty":9}`+"\n", i)
				af.Close()
			}
		}
		return sqliteCountOK(filepath.Join(sub, "out.db")) > 0
	}) {
		cmd.Process.Kill()
		t.Fatalf("the subscribed record did not land\nstderr:\n%s", errb.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitOK || interruptedRE.MatchString(out.String()) {
		t.Errorf("drained subscription: exit %d, want 0 and no interrupted line\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}

// sqliteCountOK counts the rows of t, or -1 when it cannot yet.
func sqliteCountOK(path string) int {
	d, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		return -1
	}
	defer d.Close()
	var c int
	if d.QueryRow("SELECT count(*) FROM t").Scan(&c) != nil {
		return -1
	}
	return c
}

// startRun starts mqbc with args in dir and leaves it running, its
// stdout and stderr collected (read them once it has exited).
func startRun(t *testing.T, dir string, args ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer) {
	t.Helper()
	cmd = exec.Command(mqbcBin, args...)
	cmd.Dir = dir
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdout, stderr
}

func waitUntil(timeout time.Duration, ok func() bool) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return false
}
