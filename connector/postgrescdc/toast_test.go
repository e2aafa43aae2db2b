package postgrescdc

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestPostgresCDCUnchangedTOAST: PostgreSQL does not send a large
// (TOASTed) value an update left unchanged. Under REPLICA IDENTITY FULL
// the old row holds it, and the update's record carries it; without, the
// record lacks the field (a sink writing it from the payload would write
// NULL), and the run warns once, naming the table, the column and the fix.
func TestPostgresCDCUnchangedTOAST(t *testing.T) {
	url := testsrv.Postgres(t)
	c := connect(t, url)
	b := make([]byte, 8000)
	rand.Read(b)
	big := hex.EncodeToString(b) // incompressible: stored out of line
	exec(t, c,
		`CREATE TABLE plain (id INTEGER PRIMARY KEY, n INTEGER, big TEXT)`,
		`CREATE TABLE full_id (id INTEGER PRIMARY KEY, n INTEGER, big TEXT)`,
		`ALTER TABLE full_id REPLICA IDENTITY FULL`,
		`CREATE PUBLICATION toast_pub FOR TABLE plain, full_id`,
		`SELECT pg_create_logical_replication_slot('toast_slot', 'pgoutput')`,
		fmt.Sprintf(`INSERT INTO plain VALUES (1, 1, '%s')`, big),
		fmt.Sprintf(`INSERT INTO full_id VALUES (1, 1, '%s')`, big),
		`UPDATE plain SET n = 2 WHERE id = 1`,
		`UPDATE full_id SET n = 2 WHERE id = 1`,
		`UPDATE plain SET n = 3 WHERE id = 1`)
	var logs runtest.Logs
	dir, r := startCompiled(t, fmt.Sprintf(`route r {
  from postgres_cdc { url = %q, publication = "toast_pub", slot_name = "toast_slot" }
  to file { path = "out.jsonl" }
}`, url), &logs)
	var lines []string
	waitUntil(func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		return len(lines) >= 5
	})
	r.Stop(t)
	if len(lines) != 5 {
		t.Fatalf("%d records, want 5", len(lines))
	}
	var rows []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, m)
	}
	// In commit order: the two inserts, then plain, full_id, plain.
	for i, want := range []bool{true, true, false, true, false} {
		if _, has := rows[i]["big"]; has != want || (has && rows[i]["big"] != big) {
			t.Errorf("record %d (n = %v): big present %v, want %v", i, rows[i]["n"], has, want)
		}
	}
	if n := strings.Count(logs.String(), "left its unchanged large (TOASTed) values"); n != 1 || !strings.Contains(logs.String(), "public.plain left its unchanged large (TOASTed) values of big") ||
		!strings.Contains(logs.String(), "REPLICA IDENTITY FULL") {
		t.Errorf("want one warning about public.plain's big:\n%s", logs.String())
	}
}
