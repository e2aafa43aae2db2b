package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestStateOnPostgres: a route whose checkpoint and dedup keys live on a
// PostgreSQL server: state show names the server with its password
// redacted, the position and the live keys; reset deletes them; the next
// run reads the source from its start.
func TestStateOnPostgres(t *testing.T) {
	url := testsrv.Postgres(t) // postgres://postgres@127.0.0.1:PORT/DB?sslmode=disable
	withPassword := strings.Replace(url, "postgres@", "postgres:s3cr3t-pw@", 1)
	dir := t.TempDir()
	write(t, dir, "pg.mqb", fmt.Sprintf(`route pgload {
  from file { path = "in.jsonl", checkpoint_store = %[1]q }
  id payload.id
  dedup { key = meta["mqb.id"], store = %[1]q }
  to file { path = "out", name_by = source_position }
}
`, withPassword))
	writeOrders(t, dir, 0, 15)
	if out, errOut, code := mqbc(t, dir, "run", "pg.mqb"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	writeOrders(t, dir, 15, 20)
	out, errOut, code := mqbc(t, dir, "run", "pg.mqb")
	if code != 0 || !strings.Contains(errOut, "mqbc run: resuming route pgload from record 15 (state in postgres://postgres:xxxxx@") ||
		!strings.Contains(out, "pgload: in 5, out 5") {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "state", "show", "pg.mqb")
	for _, w := range []string{"checkpoint  record 20, byte ", "table mqb_checkpoints", "namespace route/pgload in postgres://postgres:xxxxx@", "table mqb_dedup_keys: 20 live keys"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Fatalf("state show: want %q\nexit %d\n%s%s", w, code, out, errOut)
		}
	}
	for _, s := range []string{out, errOut} {
		if strings.Contains(s, "s3cr3t-pw") {
			t.Fatalf("state show printed the password:\n%s%s", out, errOut)
		}
	}
	out, errOut, code = mqbc(t, dir, "state", "reset", "--yes", "pg.mqb", "pgload")
	if code != 0 || !strings.Contains(out, "state reset (checkpoint deleted, 20 dedup keys of namespace route/pgload deleted)") || strings.Contains(out+errOut, "s3cr3t-pw") {
		t.Fatalf("state reset: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "run", "pg.mqb")
	if code != 0 || !strings.Contains(out, "pgload: in 20") || strings.Contains(errOut, "resuming") {
		t.Fatalf("run after reset: exit %d\n%s%s", code, out, errOut)
	}
}
