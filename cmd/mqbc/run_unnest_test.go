package main

import (
	"bufio"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unnestRoute explodes the line items of orders into rows keyed on the
// derived identity; %s is where a dlq block goes.
const unnestRoute = `route lines {
  guarantee effectively_once
  from file { path = "orders.jsonl" }
  id payload.order_id
  unnest payload.items as item
  %s
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, order_id TEXT, sku TEXT, qty INTEGER)"
    insert_query = "INSERT INTO t (id, order_id, sku, qty) VALUES (${meta[\"mqb.id\"]}, ${payload.order_id}, ${payload.item.sku}, ${payload.item.qty}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// TestRunUnnest runs a fan-out of line items through the binary: every
// element lands once with its parent's fields, an order with no items
// counts as filtered, one whose items are not an array goes to the DLQ
// with the reason, and a second run over the same file writes the same
// ids (the derived identity is stable), so the table does not grow.
func TestRunUnnest(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "orders.jsonl", `{"order_id":"o1","items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}
{"order_id":"o2","items":[]}
{"order_id":"o3","items":"none"}
{"order_id":"o4","items":[{"sku":"c","qty":3},{"sku":"a","qty":4},{"sku":"d","qty":5}]}
`)
	write(t, dir, "r.mqb", fmt.Sprintf(unnestRoute, `dlq { to file { path = "dlq.jsonl" } }`))
	if out, errOut, code := mqbc(t, dir, "fmt", "--check", "r.mqb"); code != 0 {
		t.Fatalf("fmt --check exit %d:\n%s%s", code, out, errOut)
	}
	var first string
	for run := 1; run <= 2; run++ {
		r := runIn(t, dir, "run", "r.mqb")
		if r.code != exitOK {
			t.Fatalf("run %d exit %d\nstdout:\n%s\nstderr:\n%s", run, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout+r.stderr, "lines: effectively-once") {
			t.Errorf("run %d does not report the route effectively-once:\n%s%s", run, r.stdout, r.stderr)
		}
		// The counts add up: 4 orders read and 3 records added by unnest
		// (o1's second item, o4's second and third) are 5 rows written,
		// o2 filtered and o3 dead-lettered.
		if want := "lines: in 4, added 3, out 5, deduplicated 0, filtered 1, dead-lettered 1, errors 0"; run == 1 && !strings.Contains(r.stdout, want) {
			t.Errorf("run 1 does not count %q:\n%s", want, r.stdout)
		}
		got := sqliteRows(t, filepath.Join(dir, "out.db"), "SELECT order_id || ' ' || sku || ' ' || qty FROM t ORDER BY order_id, qty")
		if want := "o1 a 1\no1 b 2\no4 c 3\no4 a 4\no4 d 5\n"; got != want {
			t.Errorf("after run %d the rows are\n%swant\n%s", run, got, want)
		}
		ids := sqliteRows(t, filepath.Join(dir, "out.db"), "SELECT id FROM t ORDER BY id")
		if run == 1 {
			first = ids
		} else if ids != first {
			t.Errorf("the second run wrote other ids:\n%s\nthe first:\n%s", ids, first)
		}
	}
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(dlq), "\n"); n != 1 || !strings.Contains(string(dlq), `"o3"`) {
		t.Errorf("dlq holds %d records, want o3 alone:\n%s", n, dlq)
	}
}

// TestRunUnnestKilled SIGKILLs a fan-out of line items into SQLite (ON
// CONFLICT DO NOTHING on the derived id, no dedup) several times, then
// runs it to the end: the table holds exactly the rows of a clean run,
// ids included. A parent committed before all its elements were written
// would lose the rest; ids minted afresh on the replay would write twice.
func TestRunUnnestKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test")
	}
	const orders = 30_000
	var in strings.Builder
	for i := range orders {
		fmt.Fprintf(&in, `{"order_id":"o%06d","items":[`, i)
		for j := range i%4 + 1 {
			if j > 0 {
				in.WriteByte(',')
			}
			fmt.Fprintf(&in, `{"sku":"s%d","qty":%d}`, (i+j)%97, j+1)
		}
		in.WriteString("]}\n")
	}
	route := fmt.Sprintf(unnestRoute, "")
	clean, killed := t.TempDir(), t.TempDir()
	for _, dir := range []string{clean, killed} {
		write(t, dir, "orders.jsonl", in.String())
		write(t, dir, "r.mqb", route)
	}
	if r := runIn(t, clean, "run", "r.mqb"); r.code != exitOK {
		t.Fatalf("clean run exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := sqliteDigest(t, filepath.Join(clean, "out.db"))
	total := sqliteQueryInt(t, filepath.Join(clean, "out.db"), "SELECT count(*) FROM t")
	if total != orders/4*10 {
		t.Fatalf("clean run wrote %d rows, want %d", total, orders/4*10)
	}

	db := filepath.Join(killed, "out.db")
	kills := 0
	for kills < 4 {
		before := sqliteCountOK(db)
		if before >= total {
			break
		}
		cmd := exec.Command(mqbcBin, "run", "r.mqb")
		cmd.Dir = killed
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it once it has written more rows, mid-run.
		waitUntil(60*time.Second, func() bool { return sqliteCountOK(db) > before+500 })
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		kills++
	}
	if r := runIn(t, killed, "run", "r.mqb"); r.code != exitOK {
		t.Fatalf("final run exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := sqliteQueryInt(t, db, "SELECT count(*) FROM t"); got != total {
		t.Errorf("after %d kills the table has %d rows, want %d", kills, got, total)
	}
	if got := sqliteDigest(t, db); got != want {
		t.Errorf("after %d kills the rows differ from a clean run's", kills)
	}
	t.Logf("%d kills, %d rows", kills, total)
}

// sqliteRows returns the one-column rows of query, one per line.
func sqliteRows(t *testing.T, path, query string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// sqliteDigest hashes every row of t in id order.
func sqliteDigest(t *testing.T, path string) string {
	t.Helper()
	h := sha256.New()
	w := bufio.NewWriter(h)
	w.WriteString(sqliteRows(t, path, "SELECT id || ' ' || order_id || ' ' || sku || ' ' || qty FROM t ORDER BY id"))
	w.Flush()
	return hex.EncodeToString(h.Sum(nil))
}
