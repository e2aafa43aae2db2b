package runtime_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handlerSrc: file → id → [dedup] → handle sql (audit, report_outcome) →
// dlq → sql (orders, stores the outcome the handler tagged). The audit
// counts what the handler saw (seen = seen + 1), which a replay would
// count again: the route is at-least-once, and says so.
const handlerSrc = `
route audited {
  batch_size = 16
  from file { path = "%s" }
  id payload.id
  %s
  handle sql {
    url            = "sqlite://audit.db"
    create_table   = "CREATE TABLE IF NOT EXISTS audit (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, seen INTEGER NOT NULL)"
    insert_query   = "INSERT INTO audit (id, amount, seen) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}, 1) ON CONFLICT (id) DO UPDATE SET seen = seen + 1"
    report_outcome = true
  }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://orders.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, outcome TEXT NOT NULL)"
    insert_query = "INSERT INTO orders (id, outcome) VALUES (${meta[\"mqb.id\"]}, ${meta[\"sql.outcome\"]}) ON CONFLICT (id) DO NOTHING"
  }
}
`

const handlerDedup = `dedup { key = meta["mqb.id"], ttl = 1h }`

// auditSeen returns how many times the handler wrote each id.
func auditSeen(t *testing.T, dbPath string) map[string]int {
	t.Helper()
	return sqliteMap[int](t, dbPath, `SELECT id, seen FROM audit`)
}

// orderOutcomes returns the outcome the sink stored for each id.
func orderOutcomes(t *testing.T, dbPath string) map[string]string {
	t.Helper()
	return sqliteMap[string](t, dbPath, `SELECT id, outcome FROM orders`)
}

// handlerInput is 30 orders, o005..o009 repeated, and one without amount
// (the audit's NOT NULL refuses it: dead-lettered, never in orders).
func handlerInput(t *testing.T, path string) {
	lines := append(idAmountLines("o", 1, 30), idAmountLines("o", 5, 9)...)
	writeLines(t, path, append(lines, `{"id":"x001"}`)...)
}

// TestHandlerAuditThenSink: the handler runs before the sink and its tags
// reach it; a record the handler refuses is dead-lettered and not written;
// without dedup, a duplicate reaches the handler again (its own ON
// CONFLICT absorbs it) and the sink keeps the first.
func TestHandlerAuditThenSink(t *testing.T) {
	dir := t.TempDir()
	handlerInput(t, filepath.Join(dir, "in.jsonl"))
	st := runIn(t, dir, compileMQB(t, fmt.Sprintf(handlerSrc, "in.jsonl", ""))).Route("audited")
	if st.In != 36 || st.Out != 35 || st.DeadLettered != 1 {
		t.Errorf("stats %+v, want in 36 out 35 dead-lettered 1", st)
	}
	seen := auditSeen(t, filepath.Join(dir, "audit.db"))
	outcomes := orderOutcomes(t, filepath.Join(dir, "orders.db"))
	if len(seen) != 30 || len(outcomes) != 30 {
		t.Errorf("audit has %d ids, orders %d: want 30 each", len(seen), len(outcomes))
	}
	for i := 1; i <= 30; i++ {
		id := fmt.Sprintf("o%03d", i)
		want := 1
		if i >= 5 && i <= 9 {
			want = 2 // no dedup: the handler saw the repeat
		}
		if seen[id] != want {
			t.Errorf("handler saw %s %d times, want %d", id, seen[id], want)
		}
		if outcomes[id] != "inserted" {
			t.Errorf("orders %s: outcome %q, want the handler's \"inserted\"", id, outcomes[id])
		}
	}
	if _, ok := outcomes["x001"]; ok {
		t.Error("x001, refused by the handler, reached the sink")
	}
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil || !strings.Contains(string(dlq), "handle sql") {
		t.Errorf("dlq %q (%v): want x001 with a reason naming the handler", dlq, err)
	}
}

// TestHandlerBehindDedupSeesEachRecordOnce replays the same file (its
// checkpoint removed) through a route with dedup before the handler: the
// handler sees every id once across both runs.
func TestHandlerBehindDedupSeesEachRecordOnce(t *testing.T) {
	dir := t.TempDir()
	handlerInput(t, filepath.Join(dir, "in.jsonl"))
	p := compileMQB(t, fmt.Sprintf(handlerSrc, "in.jsonl", handlerDedup))
	first := runIn(t, dir, p).Route("audited")
	if first.In != 36 || first.Out != 30 || first.Deduplicated != 5 || first.DeadLettered != 1 {
		t.Errorf("first run %+v, want in 36 out 30 deduplicated 5 dead-lettered 1", first)
	}
	// Replay: forget the file's position, keep the dedup store.
	states, _ := filepath.Glob(filepath.Join(dir, "state", "state*"))
	for _, s := range states {
		if err := os.RemoveAll(s); err != nil {
			t.Fatal(err)
		}
	}
	if len(states) == 0 {
		t.Fatalf("no checkpoint store under %s", filepath.Join(dir, "state"))
	}
	second := runIn(t, dir, p).Route("audited")
	// Every key was promoted when its record was acked, the dead-lettered
	// x001 included: the replay is all duplicates.
	if second.In != 36 || second.Deduplicated != 36 {
		t.Errorf("replay %+v, want in 36, deduplicated 36", second)
	}
	for id, n := range auditSeen(t, filepath.Join(dir, "audit.db")) {
		if n != 1 {
			t.Errorf("handler saw %s %d times across the replay, want 1", id, n)
		}
	}
	if got := len(orderOutcomes(t, filepath.Join(dir, "orders.db"))); got != 30 {
		t.Errorf("orders has %d ids, want 30", got)
	}
}

// TestHandlerNotRerunOnSinkRetry: the sink fails the batch after the
// handler succeeded (SQLite held locked past its busy timeout); the route's
// retry writes the records as the handler left them without running the
// handler again — each id seen once, every outcome "inserted".
func TestHandlerNotRerunOnSinkRetry(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "in.jsonl"), idAmountLines("k", 1, 20)...)
	src := strings.Replace(fmt.Sprintf(handlerSrc, "in.jsonl", ""), "  dlq {", "  retry {\n    attempts = 5\n    backoff  = 200ms\n  }\n  dlq {", 1)
	p := compileMQB(t, src)
	lockOutcomeTable(t, filepath.Join(dir, "orders.db"), "orders")
	st := runIn(t, dir, p).Route("audited")
	if st.In != 20 || st.Out != 20 {
		t.Errorf("stats %+v, want in 20 out 20", st)
	}
	seen := auditSeen(t, filepath.Join(dir, "audit.db"))
	if len(seen) != 20 {
		t.Errorf("audit has %d ids, want 20", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("handler ran %d times for %s, want once", n, id)
		}
	}
	for id, o := range orderOutcomes(t, filepath.Join(dir, "orders.db")) {
		if o != "inserted" {
			t.Errorf("orders %s: outcome %q, want inserted", id, o)
		}
	}
}
