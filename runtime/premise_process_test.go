package runtime_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestPremiseProcessUnchanged: a route keyed on env("X") is effectively-once
// only while X keeps its value across an unclean stop, since the records
// delivered past the committed position are read again and keyed anew. A
// run that stops at a failing record keeps the fingerprint of X; a restart
// with another X is refused (it would write those records again under new
// keys), one with the same X goes on; once a run ends with everything
// committed the fingerprint is forgotten and X may change. `mqbc state
// reset` forgets it as well.
func TestPremiseProcessUnchanged(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "out.db")
	exec := func(q string) {
		t.Helper()
		h, err := sql.Open(plantest.SQLiteDriver, "file:"+db)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if _, err := h.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	exec(`CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT)`)
	exec(`CREATE TRIGGER boom BEFORE INSERT ON t WHEN NEW.body = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END`)
	writeLines(t, filepath.Join(dir, "in.jsonl"),
		`{"id": "1", "body": "a"}`, `{"id": "2", "body": "b"}`, `{"id": "3", "body": "boom"}`, `{"id": "4", "body": "d"}`)
	p := compileMQB(t, `
route r {
  batch_size = 1
  from file { path = "in.jsonl" }
  id env("X") + "-" + payload.id
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT INTO t (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body}) ON CONFLICT (id) DO NOTHING"
  }
}`)
	if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
		t.Fatalf("verdict %s", g)
	}
	if !slicesContainsKind(p.Routes[0].Premises, plan.PremiseProcessUnchanged) {
		t.Fatalf("no %s premise in %+v", plan.PremiseProcessUnchanged, p.Routes[0].Premises)
	}
	run := func(x string) error {
		opts := runtest.Options()
		opts.BaseDir = dir
		opts.StateDir = filepath.Join(dir, "state")
		opts.Env = func(name string) string {
			if name == "X" {
				return x
			}
			return ""
		}
		_, err := runtime.Run(context.Background(), p, opts)
		return err
	}
	if err := run("a"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("first run: %v, want it to stop at the failing record", err)
	}
	err := run("b")
	if err == nil || !strings.Contains(err.Error(), `env("X") changed`) {
		t.Fatalf("run with another X after an unclean stop: %v, want it refused", err)
	}
	if err := run("a"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("run with the same X: %v, want it to go on (and stop at the same record)", err)
	}
	exec(`DROP TRIGGER boom`)
	if err := run("a"); err != nil {
		t.Fatalf("run after the fix: %v", err)
	}
	rows := runtest.SQLiteMap[string](t, db, `SELECT id, body FROM t`)
	if len(rows) != 4 || rows["a-4"] != "d" {
		t.Fatalf("rows %v, want a-1 … a-4", rows)
	}
	// Everything is committed: the next run may read another X.
	if err := run("b"); err != nil {
		t.Fatalf("run with another X after a drained stop: %v", err)
	}

	// An unclean stop again (a new line that fails), then a reset: the
	// route reads from the start, so another X no longer replays anything
	// under old keys and is let through.
	exec(`CREATE TRIGGER boom BEFORE INSERT ON t WHEN NEW.body = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END`)
	appendLines(t, filepath.Join(dir, "in.jsonl"), `{"id": "5", "body": "boom"}`)
	if err := run("b"); err == nil {
		t.Fatal("run over the new failing line succeeded")
	}
	if err := run("c"); err == nil || !strings.Contains(err.Error(), `env("X") changed`) {
		t.Fatalf("run with another X: %v, want it refused", err)
	}
	opts := runtest.Options()
	opts.BaseDir = dir
	opts.StateDir = filepath.Join(dir, "state")
	if _, err := runtime.ResetRouteState(context.Background(), p, opts, "r"); err != nil {
		t.Fatal(err)
	}
	exec(`DROP TRIGGER boom`)
	if err := run("c"); err != nil {
		t.Fatalf("run after a reset: %v", err)
	}
}

func slicesContainsKind(ps []plan.Premise, kind string) bool {
	for _, p := range ps {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

func appendLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}
