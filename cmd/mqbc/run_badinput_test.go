package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	_ "github.com/mattn/go-sqlite3"
)

// badRoute is file → id → dedup → SQLite (a STRICT table with a CHECK)
// with a DLQ: the route every file of testdata/bad runs through.
const badRoute = `route bad {
  from file { path = "in.jsonl", max_record_bytes = 1048576 }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, qty INTEGER NOT NULL CHECK (qty >= 0), body TEXT NOT NULL) STRICT"
    insert_query = """
      INSERT INTO orders (id, qty, body)
      VALUES (${meta["mqb.id"]}, ${payload.qty}, ${payload.body})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`

var statsLineRE = regexp.MustCompile(`(?m)^bad: in (\d+), out (\d+), deduplicated (\d+), filtered (\d+), dead-lettered (\d+), errors (\d+)`)

type badRun struct {
	in, out, dedup, filtered, dlq, errors int64
	maxRSSKB                              int64
	stderr                                string
}

// runBad runs badRoute over input in a fresh directory and returns the
// counts the binary printed and its peak resident set size.
func runBad(t *testing.T, dir string) badRun {
	t.Helper()
	write(t, dir, "bad.mqb", badRoute)
	cmd := exec.Command(mqbcBin, "run", "--log-level", "debug", "--log-format", "json", "bad.mqb")
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("mqbc run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), tail(errb.String(), 4000))
	}
	m := statsLineRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no stats line in stdout:\n%s", out.String())
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
	r := badRun{in: n(1), out: n(2), dedup: n(3), filtered: n(4), dlq: n(5), errors: n(6), stderr: errb.String()}
	r.maxRSSKB = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	return r
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

type dlqEntry struct {
	Error    string            `json:"error"`
	Position *uint64           `json:"position"`
	Meta     map[string]string `json:"meta"`
}

func readBadDLQ(t *testing.T, path string) []dlqEntry {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []dlqEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e dlqEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("DLQ line is not JSON: %v: %.200s", err, sc.Text())
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readOrders(t *testing.T, dbPath string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'orders'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 1 {
		t.Fatalf("table orders is gone (%d tables named orders)", tables)
	}
	rows, err := db.Query(`SELECT id, body FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		got[id] = body
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func okBody(id string) string { return "ok " + id }

// Every file of testdata/bad mixes good lines with one kind of bad line.
// Good lines land in SQLite verbatim, every bad one reaches the DLQ with a
// reason, the route keeps going to the end, and the counts add up.
func TestRunBadInputCorpus(t *testing.T) {
	cases := []struct {
		file   string
		stored map[string]string // id → body that must be in the table, and nothing else
		dedup  int64
		reason []string // each DLQ reason must match one of these
	}{
		{"invalid_utf8.jsonl", map[string]string{"u-1": okBody("u-1"), "u-2": okBody("u-2")}, 0,
			[]string{"invalid UTF-8", "invalid JSON"}},
		{"nul_bytes.jsonl", map[string]string{"n-1": okBody("n-1"), "n-2": okBody("n-2")}, 0,
			[]string{"control character", "invalid JSON"}},
		{"depth_bomb.jsonl", map[string]string{"d-1": okBody("d-1"), "d-2": okBody("d-2")}, 0,
			[]string{"nesting deeper than"}},
		{"wrong_types.jsonl", map[string]string{"w-1": okBody("w-1"), "w-2": okBody("w-2")}, 0,
			[]string{"cannot store", "NOT NULL constraint", "CHECK constraint", "does not fit column qty"}},
		{"missing_key.jsonl", map[string]string{"m-1": okBody("m-1"), "m-2": okBody("m-2")}, 0,
			[]string{"no identity", "invalid JSON"}},
		{"sql_injection.jsonl", map[string]string{
			"s-1":                       okBody("s-1"),
			"s-2":                       "'); DROP TABLE orders; --",
			"'); DROP TABLE orders; --": "id is an injection",
			"s-3":                       `"; DELETE FROM orders WHERE 1=1; --`,
			"s-4":                       "1' OR '1'='1",
			"s-5":                       "?; ATTACH DATABASE '/tmp/x.db' AS x; --",
			"s-6":                       "${payload.order_id} $1 :id @id",
		}, 1, nil},
	}
	for _, tc := range cases {
		t.Run(strings.TrimSuffix(tc.file, ".jsonl"), func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "bad", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			write(t, dir, "in.jsonl", string(data))
			r := runBad(t, dir)
			lines := int64(0)
			for _, l := range bytes.Split(data, []byte("\n")) {
				if len(bytes.TrimSpace(l)) > 0 {
					lines++
				}
			}
			checkBadCounts(t, r, lines)
			got := readOrders(t, filepath.Join(dir, "out.db"))
			for id, body := range tc.stored {
				if g, ok := got[id]; !ok || g != body {
					t.Errorf("row %q: got %q (present %v), want %q stored verbatim", id, g, ok, body)
				}
			}
			for id := range got {
				if _, ok := tc.stored[id]; !ok {
					t.Errorf("unexpected row %q = %q (a bad record was written)", id, got[id])
				}
			}
			if r.out != int64(len(tc.stored)) || r.dedup != tc.dedup {
				t.Errorf("out %d, deduplicated %d; want %d, %d", r.out, r.dedup, len(tc.stored), tc.dedup)
			}
			dlq := readBadDLQ(t, filepath.Join(dir, "dlq.jsonl"))
			checkBadDLQ(t, dlq, r, tc.reason)
		})
	}
}

func checkBadCounts(t *testing.T, r badRun, lines int64) {
	t.Helper()
	if r.in != lines {
		t.Errorf("in %d, want %d (one per non-blank line)", r.in, lines)
	}
	if r.in != r.out+r.dedup+r.filtered+r.dlq+r.errors {
		t.Errorf("counts do not add up: in %d != out %d + deduplicated %d + filtered %d + dead-lettered %d + errors %d",
			r.in, r.out, r.dedup, r.filtered, r.dlq, r.errors)
	}
	if r.errors != 0 {
		t.Errorf("%d records dropped with errors: every bad record must reach the DLQ", r.errors)
	}
}

func checkBadDLQ(t *testing.T, dlq []dlqEntry, r badRun, reasons []string) {
	t.Helper()
	if int64(len(dlq)) != r.dlq {
		t.Errorf("DLQ holds %d records, the run dead-lettered %d", len(dlq), r.dlq)
	}
	seen := map[uint64]bool{}
	for _, e := range dlq {
		if e.Error == "" || e.Meta["mqb.error"] != e.Error {
			t.Errorf("DLQ entry without a reason: %+v", e)
		}
		if e.Position == nil || seen[*e.Position] {
			t.Errorf("DLQ entry with a missing or repeated position: %+v", e)
		} else {
			seen[*e.Position] = true
		}
		ok := len(reasons) == 0
		for _, want := range reasons {
			ok = ok || strings.Contains(e.Error, want)
		}
		if !ok {
			t.Errorf("DLQ reason %q matches none of %q", e.Error, reasons)
		}
	}
}

// A line far beyond max_record_bytes goes to the DLQ with a reason naming
// the limit, without the process ever holding the line: its peak RSS stays
// a fraction of the line's size, and the lines after it are still loaded.
func TestRunBadInputHugeLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 256 MiB line")
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "in.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, `{"order_id":"h-1","qty":1,"body":"ok h-1"}`)
	const huge = 256 << 20
	w.WriteString(`{"order_id":"h-bad","qty":1,"body":"`)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for i := 0; i < huge>>20; i++ {
		w.Write(chunk)
	}
	w.WriteString("\"}\n")
	// Just over the limit, and a huge line with no newline at the end.
	fmt.Fprintf(w, `{"order_id":"h-bad-2","qty":1,"body":"%s"}`+"\n", bytes.Repeat([]byte("y"), 1<<20))
	fmt.Fprintln(w, `{"order_id":"h-2","qty":1,"body":"ok h-2"}`)
	for i := 0; i < 64; i++ {
		w.Write(chunk)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := runBad(t, dir)
	checkBadCounts(t, r, 5)
	t.Logf("peak RSS %d MiB for a %d MiB line", r.maxRSSKB>>10, huge>>20)
	if r.maxRSSKB > 128<<10 {
		t.Errorf("peak RSS %d MiB: the over-long line was buffered (limit 128 MiB for a %d MiB line)", r.maxRSSKB>>10, huge>>20)
	}
	got := readOrders(t, filepath.Join(dir, "out.db"))
	if len(got) != 2 || got["h-1"] != okBody("h-1") || got["h-2"] != okBody("h-2") {
		t.Errorf("rows %v, want h-1 and h-2", got)
	}
	dlq := readBadDLQ(t, filepath.Join(dir, "dlq.jsonl"))
	checkBadDLQ(t, dlq, r, []string{"exceeds max_record_bytes = 1048576"})
	if len(dlq) != 3 {
		t.Errorf("DLQ holds %d records, want 3", len(dlq))
	}
	if fi, err := os.Stat(filepath.Join(dir, "dlq.jsonl")); err == nil && fi.Size() > 1<<20 {
		t.Errorf("DLQ file is %d bytes: an over-long record must be kept as a snippet", fi.Size())
	}
}
