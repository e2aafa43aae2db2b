package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"
)

// recycledInput writes n records of varying length, o000000…, whose qty
// is "x" (a filter comparing it fails) at the indexes in bad, and returns
// each record's line by index.
func recycledInput(t *testing.T, path string, n int, bad func(i int) bool) []string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	lines := make([]string, n)
	for i := range n {
		qty := fmt.Sprint(i%100 + 10)
		if bad(i) {
			qty = `"x"`
		}
		// A pad of random length: batches' arenas differ in layout, so a
		// record reading another's bytes shows.
		// Keys in order: ${payload} renders the line as read.
		lines[i] = fmt.Sprintf(`{"id":"o%06d","pad":"%s","qty":%s}`, i, strings.Repeat("p", rng.IntN(200)), qty)
		fmt.Fprintln(bw, lines[i])
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return lines
}

// checkEnvelopes reads a DLQ file and checks each envelope holds the
// payload read at its position, with a reason, and (once) no position
// twice; it returns the positions.
func checkEnvelopes(t *testing.T, path string, lines []string, reason string, once bool) map[uint64]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l == "" {
			continue
		}
		var e struct {
			Error    string          `json:"error"`
			Position uint64          `json:"position"`
			Payload  json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("DLQ line %q: %v", l, err)
		}
		if e.Position >= uint64(len(lines)) || string(e.Payload) != lines[e.Position] {
			t.Errorf("DLQ envelope at position %d holds another record's bytes: %s", e.Position, e.Payload)
		}
		if !strings.Contains(e.Error, reason) {
			t.Errorf("DLQ envelope at position %d: reason %q lacks %q", e.Position, e.Error, reason)
		}
		if once && seen[e.Position] {
			t.Errorf("DLQ holds position %d twice", e.Position)
		}
		seen[e.Position] = true
	}
	return seen
}

// Routes whose batches are reused once acked (a line sink, or a SQLite
// sink, with a file DLQ and steps that keep payloads): every record that
// outlives its write in something else (a DLQ envelope, a retried write,
// a refused row's reason) must hold its own bytes, not those of a record
// of a later batch read into the same memory. Small batches, several
// workers and payloads of random length make a reuse too early show as a
// line or envelope holding another record.
func TestRecycledRoutesKeepEachRecordsBytes(t *testing.T) {
	const n = 20_000
	bad := func(i int) bool { return i%173 == 5 }

	t.Run("file to file, failing filter, file dlq", func(t *testing.T) {
		dir := t.TempDir()
		lines := recycledInput(t, filepath.Join(dir, "in.jsonl"), n, bad)
		write(t, dir, "r.mqb", `route r {
  concurrency = 4, batch_size = 16
  from file { path = "in.jsonl" }
  filter payload.qty > 5
  dlq { to file { path = "dlq.jsonl" } }
  to file { path = "out.jsonl" }
}
`)
		res := runIn(t, dir, "run", "r.mqb")
		if res.code != exitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
		}
		checkSummary(t, res.stdout)
		want := map[string]bool{}
		for i, l := range lines {
			if !bad(i) {
				want[l] = true
			}
		}
		out := readFileLines(t, filepath.Join(dir, "out.jsonl"))
		got := map[string]bool{}
		for _, l := range out {
			if !want[l] || got[l] {
				t.Fatalf("output line %q is not a record of the input read once", l)
			}
			got[l] = true
		}
		if len(got) != len(want) {
			t.Errorf("output holds %d records, want %d", len(got), len(want))
		}
		dlq := checkEnvelopes(t, filepath.Join(dir, "dlq.jsonl"), lines, "", true)
		for i := range n {
			if bad(i) != dlq[uint64(i)] {
				t.Errorf("record %d: bad %v, dead-lettered %v", i, bad(i), dlq[uint64(i)])
			}
		}
	})

	t.Run("file to sqlite, refused rows, a retried write, file dlq", func(t *testing.T) {
		dir := t.TempDir()
		lines := recycledInput(t, filepath.Join(dir, "in.jsonl"), n, bad)
		db := filepath.Join(dir, "out.db")
		// The sink's first writes meet a lock held past its busy timeout:
		// they fail retryably and are written again.
		lockSQLite(t, db, "CREATE TABLE t (id TEXT PRIMARY KEY, qty INTEGER NOT NULL, body TEXT NOT NULL) STRICT", 5500*time.Millisecond)
		write(t, dir, "r.mqb", `route r {
  concurrency = 2, batch_size = 16
  from file { path = "in.jsonl" }
  id payload.id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  retry { attempts = 20, backoff = 200ms, max_backoff = 1s }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER NOT NULL, body TEXT NOT NULL) STRICT"
    insert_query = "INSERT INTO t (id, qty, body) VALUES (${meta[\"mqb.id\"]}, ${payload.qty}, ${payload}) ON CONFLICT (id) DO NOTHING"
  }
}
`)
		res := runIn(t, dir, "run", "r.mqb")
		if res.code != exitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
		}
		checkSummary(t, res.stdout)
		if !strings.Contains(res.stderr, "retrying") {
			t.Errorf("no write was retried:\n%s", res.stderr)
		}
		h, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		rows, err := h.Query("SELECT id, body FROM t")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		count := 0
		for rows.Next() {
			var id, body string
			if err := rows.Scan(&id, &body); err != nil {
				t.Fatal(err)
			}
			var i int
			if _, err := fmt.Sscanf(id, "o%06d", &i); err != nil || i >= n || body != lines[i] || bad(i) {
				t.Errorf("row %s holds %q, want the record read for it", id, body)
			}
			count++
		}
		if count != n-countBad(n, bad) {
			t.Errorf("%d rows, want %d", count, n-countBad(n, bad))
		}
		dlq := checkEnvelopes(t, filepath.Join(dir, "dlq.jsonl"), lines, "", true)
		for i := range n {
			if bad(i) != dlq[uint64(i)] {
				t.Errorf("record %d: bad %v, dead-lettered %v", i, bad(i), dlq[uint64(i)])
			}
		}
	})
}

func countBad(n int, bad func(int) bool) int {
	c := 0
	for i := range n {
		if bad(i) {
			c++
		}
	}
	return c
}

func readFileLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(data), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lockSQLite creates the database at path with table ddl, then holds its
// write lock for d.
func lockSQLite(t *testing.T, path, ddl string, d time.Duration) {
	t.Helper()
	lock, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	lock.SetMaxOpenConns(1)
	if _, err := lock.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	tx, err := lock.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("CREATE TABLE lock_held (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(d)
		tx.Rollback()
	}()
}

// checkSummary parses route r's summary line and checks its counts add
// up, as mqbc run itself now does before exiting 0.
func checkSummary(t *testing.T, stdout string) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no summary line in:\n%s", stdout)
	}
	var v [6]int64
	for i := range v {
		fmt.Sscan(m[i+1], &v[i])
	}
	if v[0] != v[1]+v[2]+v[3]+v[4]+v[5] {
		t.Errorf("summary counts do not add up: %s", m[0])
	}
}

var summaryRE = regexp.MustCompile(`(?m)^r: in (\d+), out (\d+), deduplicated (\d+), filtered (\d+), dead-lettered (\d+), errors (\d+)`)

// A route whose counts do not add up read a record it neither delivered,
// dropped nor dead-lettered: the run must not exit 0 on it.
func TestCountsAddUp(t *testing.T) {
	for _, tc := range []struct {
		r    runtime.RouteStats
		want bool
	}{
		{runtime.RouteStats{In: 10, Out: 4, Deduplicated: 1, Filtered: 2, DeadLettered: 2, Errors: 1}, true},
		{runtime.RouteStats{In: 3, Added: 4, Out: 7}, true},
		{runtime.RouteStats{In: 10, Out: 9}, false},
		{runtime.RouteStats{In: 10, Out: 11}, false},
		{runtime.RouteStats{In: 3, Added: 4, Out: 3}, false},
	} {
		if got := countsAddUp(tc.r); got != tc.want {
			t.Errorf("countsAddUp(%+v) = %v, want %v", tc.r, got, tc.want)
		}
	}
}
