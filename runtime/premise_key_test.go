package runtime_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

// TestPremiseKeyNullDeadLettered: under a key_present premise, a record
// whose conflict column would be bound NULL (a missing field) goes to the
// DLQ with the reason; a NULL in another column is written. Without the
// premise, the NULL key row is written (and a replay would duplicate it).
func TestPremiseKeyNullDeadLettered(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id": "a", "v": 1}`,
		`{"idd": "b", "v": 2}`,
		`{"id": "c"}`,
		`{"id": null, "v": 4}`,
	)
	src := `
route r {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT UNIQUE, v INT)"
    insert_query = "INSERT INTO t (id, v) VALUES (${payload.id}, ${payload.v}) ON CONFLICT DO NOTHING"
  }
}`
	p := compileMQB(t, src)
	p.Routes[0].Premises = nil // this test checks its hand-made premise
	p = withPremise(t, p, plan.Premise{Kind: plan.PremiseKeyPresent, When: plan.CheckPerRecord,
		Columns: []string{"id"}, Holds: "id is never NULL", Reason: "write: ON CONFLICT DO NOTHING"})
	st := runIn(t, dir, p).Route("r")
	if st.Out != 2 || st.DeadLettered != 2 {
		t.Fatalf("stats %+v", st)
	}
	if ids := sqliteIDs(t, filepath.Join(dir, "out.db"), "t"); strings.Join(ids, ",") != "a,c" {
		t.Errorf("rows %v, want a, c", ids)
	}
	lines := readDLQLines(t, filepath.Join(dir, "dlq.jsonl"))
	for _, l := range lines {
		if !strings.Contains(l.Error, "key column id would be NULL; NULLs never conflict") {
			t.Errorf("DLQ reason %q", l.Error)
		}
	}
	if len(lines) != 2 {
		t.Errorf("DLQ has %d lines, want 2", len(lines))
	}
}

// TestPremiseIDKeyRenders: `id "ord-${payload.order_id}"` on a record
// without order_id never yields the key "ord-<nil>" (which collapsed
// thousands of records into one row): with the key_present premise the
// id step dead-letters it, naming the reason.
func TestPremiseIDKeyRenders(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 50 {
		lines = append(lines, fmt.Sprintf(`{"orderid": %d}`, i)) // the field is misspelt
	}
	lines = append(lines, `{"order_id": 7}`)
	writeLines(t, filepath.Join(dir, "in.jsonl"), lines...)
	src := `
route r {
  from file { path = "in.jsonl" }
  id "ord-${payload.order_id}"
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY)"
    insert_query = "INSERT INTO t (id) VALUES (${meta[\"mqb.id\"]}) ON CONFLICT (id) DO NOTHING"
  }
}`
	p := compileMQB(t, src)
	var idNode string
	for _, n := range p.Routes[0].Nodes {
		if n.Kind == "id" {
			idNode = n.ID
		}
	}
	p = withPremise(t, p, plan.Premise{Kind: plan.PremiseKeyPresent, When: plan.CheckPerRecord, Node: idNode,
		Columns: []string{"payload.order_id"}, Holds: "payload.order_id is present", Reason: "identity: id"})
	st := runIn(t, dir, p).Route("r")
	if st.Out != 1 || st.DeadLettered != 50 {
		t.Fatalf("stats %+v", st)
	}
	if ids := sqliteIDs(t, filepath.Join(dir, "out.db"), "t"); strings.Join(ids, ",") != "ord-7" {
		t.Errorf("rows %v, want ord-7 alone", ids)
	}
	for _, l := range readDLQLines(t, filepath.Join(dir, "dlq.jsonl")) {
		if !strings.Contains(l.Error, "missing or null") || !strings.Contains(l.Error, "identity: id") {
			t.Fatalf("DLQ reason %q", l.Error)
		}
	}
}

// TestPremiseUniqueKeyArmsNullCheck: an INSERT with no conflict target into
// a table the file does not create leaves the compiler a unique_key premise
// over the columns bound to stable values (beside no_triggers) and no key_present premise (it
// cannot know which columns the key is made of). The start-up check finds
// the key (id) and arms the NULL check on it: a record without an id goes
// to the DLQ (SQLite lets a UNIQUE column hold many NULLs, so it would land
// again on every replay), a record without v is written.
func TestPremiseUniqueKeyArmsNullCheck(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open(plantest.SQLiteDriver, "file:"+filepath.Join(dir, "out.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (id TEXT UNIQUE, v INT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	writeLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id": "a", "v": 1}`,
		`{"v": 2}`,
		`{"id": "c"}`,
		`{"id": null, "v": 4}`,
	)
	p := compileMQB(t, `
route r {
  from file { path = "in.jsonl" }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT OR IGNORE INTO t (id, v) VALUES (${payload.id}, ${payload.v})"
  }
}`)
	var kinds []string
	for _, pr := range p.Routes[0].Premises {
		kinds = append(kinds, pr.Kind)
	}
	if want := plan.PremiseUniqueKey + "," + plan.PremiseNoTriggers; strings.Join(kinds, ",") != want {
		t.Fatalf("premises %v, want only %s (the test is about the start-up check arming the NULL check)", kinds, want)
	}
	for range 2 { // the second run reads nothing new: the rows stay as they are
		st := runIn(t, dir, p).Route("r")
		if st.Out+st.DeadLettered == 0 {
			continue
		}
		if st.Out != 2 || st.DeadLettered != 2 {
			t.Fatalf("stats %+v", st)
		}
	}
	if ids := sqliteIDs(t, filepath.Join(dir, "out.db"), "t"); strings.Join(ids, ",") != "a,c" {
		t.Errorf("rows %v, want a, c", ids)
	}
	lines := readDLQLines(t, filepath.Join(dir, "dlq.jsonl"))
	for _, l := range lines {
		if !strings.Contains(l.Error, "key column id would be NULL") {
			t.Errorf("DLQ reason %q", l.Error)
		}
	}
	if len(lines) != 2 {
		t.Errorf("DLQ has %d lines, want 2", len(lines))
	}
}
