package main

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// stateSrc loads orders into SQLite (idempotent on the id) after a dedup
// step (kept, though the sink makes it redundant, so that it has state),
// and copies them into part files: two routes with state of both kinds,
// kept in the default stores under the working directory.
const stateSrc = `route load {
  from file { path = "in.jsonl" }
  id payload.id
  dedup { key = meta["mqb.id"], keep = true }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, v INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, v) VALUES (${meta[\"mqb.id\"]}, ${payload.v}) ON CONFLICT (id) DO NOTHING"
  }
}

route copy {
  from file { path = "in.jsonl" }
  to file { path = "out/parts", name_by = source_position }
}
`

func writeOrders(t *testing.T, dir string, from, to int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "in.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := from; i < to; i++ {
		fmt.Fprintf(f, "{\"id\": \"o-%04d\", \"v\": %d}\n", i, i)
	}
}

func sqliteCount(t *testing.T, db string) int {
	t.Helper()
	h, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var n int
	if err := h.QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStateShowResetAndResume: state show says where each route's state
// lives and what it holds; run says where it resumes; state reset asks
// first, then forgets one route's checkpoint and dedup keys only, and the
// next run reads that route's source from its start.
func TestStateShowResetAndResume(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "s.mqb", stateSrc)
	writeOrders(t, dir, 0, 30)
	stateDir := filepath.Join(dir, ".mqb")

	out, errOut, code := mqbc(t, dir, "state", "show", "s.mqb")
	if code != 0 || !strings.Contains(out, "route load\n  checkpoint  none in "+filepath.Join(stateDir, "state")) ||
		!strings.Contains(out, "namespace route/load in "+filepath.Join(stateDir, "dedup")+": no keys") {
		t.Fatalf("state show before any run: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(stateDir); err == nil {
		t.Errorf("state show created %s: looking must not create a store", stateDir)
	}

	out, errOut, code = mqbc(t, dir, "run", "s.mqb")
	if code != 0 || strings.Contains(errOut, "resuming") {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	writeOrders(t, dir, 30, 40)
	out, errOut, code = mqbc(t, dir, "run", "s.mqb")
	want := "mqbc run: resuming route load from record 30 (state in " + filepath.Join(stateDir, "state") + "; byte "
	if code != 0 || !strings.Contains(errOut, want) || !strings.Contains(out, "load: in 10, out 10") {
		t.Fatalf("second run: want %q on stderr and 10 new records\nexit %d\n%s%s", want, code, out, errOut)
	}

	out, errOut, code = mqbc(t, dir, "state", "show", "s.mqb", "load")
	for _, w := range []string{
		"route load\n  checkpoint  record 40, byte ",
		"file identity: device ",
		"namespace route/load in " + filepath.Join(stateDir, "dedup") + ": 40 live keys",
	} {
		if code != 0 || !strings.Contains(out, w) {
			t.Fatalf("state show load: want %q\nexit %d\n%s%s", w, code, out, errOut)
		}
	}
	if strings.Contains(out, "route copy") {
		t.Errorf("state show load printed another route:\n%s", out)
	}

	// Not confirmed: nothing is reset.
	out, errOut, code = mqbc(t, dir, "state", "reset", "s.mqb", "load")
	if code != 1 || !strings.Contains(out, "deletes its checkpoint (record 40") ||
		!strings.Contains(out, "deletes the 40 dedup keys of namespace route/load") ||
		!strings.Contains(out, "the next run reads the source from its start") ||
		!strings.Contains(out, "part files already written (name_by = source_position) are kept") ||
		!strings.Contains(errOut, "not confirmed; nothing was reset") {
		t.Fatalf("state reset without --yes: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, _ := mqbc(t, dir, "state", "show", "s.mqb", "load"); !strings.Contains(out, "checkpoint  record 40") {
		t.Fatalf("an unconfirmed reset changed the state:\n%s", out)
	}

	out, errOut, code = mqbc(t, dir, "state", "reset", "--yes", "s.mqb", "load")
	if code != 0 || !strings.Contains(out, "route load: state reset (checkpoint deleted, 40 dedup keys of namespace route/load deleted)") {
		t.Fatalf("state reset --yes: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "state", "show", "s.mqb")
	if code != 0 || !strings.Contains(out, "route load\n  checkpoint  none in ") || !strings.Contains(out, "namespace route/load in "+filepath.Join(stateDir, "dedup")+": 0 live keys") ||
		!strings.Contains(out, "route copy\n  checkpoint  record 40, byte ") {
		t.Fatalf("after resetting load, want load empty and copy untouched: exit %d\n%s%s", code, out, errOut)
	}

	// The reset route reads its source again; its idempotent table
	// absorbs the replay. The other route resumes where it was.
	out, errOut, code = mqbc(t, dir, "run", "s.mqb")
	if code != 0 || !strings.Contains(out, "load: in 40, out 40") || !strings.Contains(out, "copy: in 0") ||
		strings.Contains(errOut, "resuming route load") || !strings.Contains(errOut, "resuming route copy from record 40") {
		t.Fatalf("run after reset: exit %d\n%s%s", code, out, errOut)
	}
	if n := sqliteCount(t, filepath.Join(dir, "out.db")); n != 40 {
		t.Errorf("orders holds %d rows after the replay, want 40", n)
	}

	out, errOut, code = mqbc(t, dir, "state", "reset", "--yes", "s.mqb", "nope")
	if code != 1 || !strings.Contains(errOut, "no route nope here (routes: load, copy)") {
		t.Errorf("state reset of an unknown route: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = mqbc(t, dir, "state", "reset", "--yes", "s.mqb"); code != 2 {
		t.Errorf("state reset without a route: exit %d, want 2\n%s", code, errOut)
	}
}

// TestStateTwoPlansOneRouteName: a.mqb and b.mqb beside each other each
// have a route named load. b's run is refused, naming a.mqb, and writes
// nothing (it once took a's dedup keys for its own and dropped every
// record); state show says whose the state is; state reset from b is
// refused; a renamed plan takes the state over with state adopt and
// resumes where a stopped.
func TestStateTwoPlansOneRouteName(t *testing.T) {
	dir := t.TempDir()
	load := strings.SplitN(stateSrc, "route copy", 2)[0]
	write(t, dir, "a.mqb", load)
	write(t, dir, "b.mqb", strings.ReplaceAll(load, "out.db", "b.db"))
	writeOrders(t, dir, 0, 20)
	if out, errOut, code := mqbc(t, dir, "run", "a.mqb"); code != 0 {
		t.Fatalf("run a.mqb: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := mqbc(t, dir, "run", "b.mqb")
	if code != 1 || !strings.Contains(errOut, "route load of b.mqb: its dedup namespace route/load in "+filepath.Join(dir, ".mqb", "dedup")+" belongs to the route load of a.mqb") ||
		!strings.Contains(errOut, "mqbc state adopt b.mqb load") || strings.Contains(errOut, "resuming") {
		t.Fatalf("run b.mqb over a.mqb's state: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "b.db")); err == nil && sqliteCount(t, filepath.Join(dir, "b.db")) > 0 {
		t.Errorf("the refused route wrote rows")
	}
	out, errOut, code = mqbc(t, dir, "state", "show", "b.mqb")
	if code != 0 || !strings.Contains(out, "saved by the route load of a.mqb, not of b.mqb") || !strings.Contains(out, "belongs to the route load of a.mqb, not of b.mqb") {
		t.Fatalf("state show b.mqb: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "state", "reset", "--yes", "b.mqb", "load")
	if code != 1 || !strings.Contains(errOut, "reset it from its own plan (mqbc state reset a.mqb load)") {
		t.Fatalf("state reset from b.mqb: exit %d\n%s%s", code, out, errOut)
	}

	// a.mqb renamed c.mqb: refused until it adopts the state, then it
	// resumes at record 20.
	write(t, dir, "c.mqb", load)
	if _, errOut, code := mqbc(t, dir, "run", "c.mqb"); code != 1 || !strings.Contains(errOut, "belongs to the route load of a.mqb") {
		t.Fatalf("run c.mqb before adopting: exit %d\n%s", code, errOut)
	}
	out, errOut, code = mqbc(t, dir, "state", "adopt", "c.mqb", "load")
	if code != 0 || !strings.Contains(out, "route load: its checkpoint (from a.mqb), dedup namespace route/load (from a.mqb) now c.mqb's") {
		t.Fatalf("state adopt c.mqb load: exit %d\n%s%s", code, out, errOut)
	}
	writeOrders(t, dir, 20, 25)
	out, errOut, code = mqbc(t, dir, "run", "c.mqb")
	if code != 0 || !strings.Contains(errOut, "resuming route load from record 20") || !strings.Contains(out, "load: in 5, out 5") {
		t.Fatalf("run c.mqb after adopting: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := mqbc(t, dir, "run", "a.mqb"); code != 1 || !strings.Contains(errOut, "belongs to the route load of c.mqb") {
		t.Fatalf("run a.mqb after c.mqb adopted: exit %d\n%s", code, errOut)
	}
}

// TestStateOutputGone: with the route's part files removed (rm -rf out)
// and its state left behind, run says the rerun will not write again what
// the state says was delivered and names state reset; after the reset
// the parts are written again in full.
func TestStateOutputGone(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "s.mqb", stateSrc)
	writeOrders(t, dir, 0, 25)
	if out, errOut, code := mqbc(t, dir, "run", "s.mqb"); code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.RemoveAll(filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := mqbc(t, dir, "run", "s.mqb")
	if strings.Contains(errOut, "warning: route load") {
		t.Errorf("route load's SQLite database is there, yet it was warned about:\n%s", errOut)
	}
	warn := regexp.MustCompile(`mqbc run: warning: route copy: its part directory \S+/out/parts is gone or holds no part file, but its state says records were delivered: its checkpoint is at record 25, .*This run will not write again what that state says was delivered\. .*mqbc state reset s\.mqb copy`)
	if code != 0 || !warn.MatchString(errOut) || !strings.Contains(out, "copy: in 0") {
		t.Fatalf("run with the output gone: want the warning naming state reset\nexit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := mqbc(t, dir, "state", "reset", "--yes", "s.mqb", "copy"); code != 0 {
		t.Fatalf("state reset copy: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "run", "s.mqb")
	if code != 0 || !strings.Contains(out, "copy: in 25, out 25") || strings.Contains(errOut, "warning: route copy") {
		t.Fatalf("run after reset: exit %d\n%s%s", code, out, errOut)
	}
	lines := 0
	parts, _ := filepath.Glob(filepath.Join(dir, "out", "parts", "part-*"))
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(b), "\n")
	}
	if lines != 25 {
		t.Errorf("the part files hold %d lines after the reset and rerun, want 25", lines)
	}

	// The SQLite database removed under state left behind: warned too.
	if err := os.Remove(filepath.Join(dir, "out.db")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = mqbc(t, dir, "run", "s.mqb")
	sqliteWarn := regexp.MustCompile(`mqbc run: warning: route load: its SQLite database \S+/out\.db is gone or empty, but its state says records were delivered: its checkpoint is at record 25, .*its dedup namespace route/load remembers 25 keys .*mqbc state reset s\.mqb load`)
	if code != 0 || !sqliteWarn.MatchString(errOut) {
		t.Fatalf("run with the database gone: want the warning naming state reset\nexit %d\n%s%s", code, out, errOut)
	}
}

// TestStateDirFlag: --state DIR moves the stores left at their defaults
// (beside the .mqb file otherwise), for run and state alike, whatever the
// working directory.
func TestStateDirFlag(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "p")
	if err := os.Mkdir(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, pipe, "s.mqb", stateSrc)
	writeOrders(t, pipe, 0, 5)
	st := filepath.Join(dir, "elsewhere")
	if out, errOut, code := mqbc(t, dir, "run", "--state", st, "p/s.mqb"); code != 0 {
		t.Fatalf("run --state: exit %d\n%s%s", code, out, errOut)
	}
	for _, d := range []string{filepath.Join(dir, ".mqb"), filepath.Join(pipe, ".mqb")} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("run --state %s still wrote %s", st, d)
		}
	}
	out, errOut, code := mqbc(t, dir, "state", "show", "--state", st, "p/s.mqb", "load")
	if code != 0 || !strings.Contains(out, "checkpoint  record 5, byte ") || !strings.Contains(out, " in "+filepath.Join(st, "state")) ||
		!strings.Contains(out, "in "+filepath.Join(st, "dedup")+": 5 live keys") {
		t.Fatalf("state show --state: exit %d\n%s%s", code, out, errOut)
	}
	// Without --state, the default is beside the .mqb file: nothing there.
	out, errOut, code = mqbc(t, dir, "state", "show", "p/s.mqb", "load")
	if code != 0 || !strings.Contains(out, "checkpoint  none in "+filepath.Join(pipe, ".mqb", "state")) {
		t.Fatalf("state show without --state: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRunCheck: `mqbc run --check` checks the premises and connections
// like `mqbc check` and exits without reading a record: a failing premise
// exits 1 naming the fix; a passing one exits 0, the sink table and the
// route's state untouched.
func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "out.db")
	h, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Exec(`CREATE TABLE orders (id TEXT, v INT)`); err != nil {
		t.Fatal(err)
	}
	writeOrders(t, dir, 0, 10)
	write(t, dir, "r.mqb", `route load {
  from file { path = "in.jsonl" }
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT OR IGNORE INTO orders (id, v) VALUES (${payload.id}, ${payload.v})"
  }
}
`)
	out, errOut, code := mqbc(t, dir, "run", "--check", "r.mqb")
	if code != 1 || !strings.Contains(out, "FAILED load: start-up unique_key") || !strings.Contains(out, "fix: CREATE UNIQUE INDEX orders_id_v ON orders (id, v)") {
		t.Fatalf("run --check without the index: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := h.Exec(`CREATE UNIQUE INDEX orders_id ON orders (id)`); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = mqbc(t, dir, "run", "--check", "r.mqb")
	if code != 0 || !strings.Contains(out, "ok     load: start-up unique_key") || strings.Contains(out, "load: in ") {
		t.Fatalf("run --check with the index: exit %d\n%s%s", code, out, errOut)
	}
	if n := sqliteCount(t, db); n != 0 {
		t.Errorf("run --check wrote %d rows: it must read no record", n)
	}
	if out, _, _ := mqbc(t, dir, "state", "show", "r.mqb"); !strings.Contains(out, "checkpoint  none in ") {
		t.Errorf("run --check left a checkpoint:\n%s", out)
	}
}

// TestStateResetAfterReplacedInput: a re-exported input is refused with
// the exact reset command for this pipeline file; running it lets the
// next run read the new file from its start.
func TestStateResetAfterReplacedInput(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "one.mqb", `route load {
  from file { path = "in.jsonl" }
  to file { path = "out", name_by = source_position }
}
`)
	writeOrders(t, dir, 0, 20)
	if out, errOut, code := mqbc(t, dir, "run", "one.mqb"); code != 0 {
		t.Fatalf("first run: exit %d\n%s%s", code, out, errOut)
	}
	if err := os.Remove(filepath.Join(dir, "in.jsonl")); err != nil {
		t.Fatal(err)
	}
	writeOrders(t, dir, 100, 130) // a new export under the same name
	out, errOut, code := mqbc(t, dir, "run", "one.mqb")
	if code != 1 || !strings.Contains(errOut, "`mqbc state reset one.mqb load`") {
		t.Fatalf("run over a replaced input: want a refusal naming `mqbc state reset one.mqb load`\nexit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := mqbc(t, dir, "state", "reset", "--yes", "one.mqb", "load"); code != 0 {
		t.Fatalf("state reset: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "run", "one.mqb")
	if code != 0 || !strings.Contains(out, "load: in 30, out 30") {
		t.Fatalf("run after the reset: want the 30 records of the new export\nexit %d\n%s%s", code, out, errOut)
	}
}

// TestStateResetKeepsSharedNamespace: a dedup namespace shared with other
// routes on purpose is shown as shared and kept by a reset of one of
// them (its keys are theirs too); the route's checkpoint still goes.
func TestStateResetKeepsSharedNamespace(t *testing.T) {
	dir := t.TempDir()
	var src strings.Builder
	for _, name := range []string{"a", "b"} {
		fmt.Fprintf(&src, `route %s {
  from file { path = "in.jsonl" }
  id payload.id
  dedup { key = meta["mqb.id"], namespace = "orders" }
  to file { path = "out-%s", name_by = source_position }
}
`, name, name)
	}
	write(t, dir, "s.mqb", src.String())
	writeOrders(t, dir, 0, 12)
	if out, errOut, code := mqbc(t, dir, "run", "s.mqb"); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := mqbc(t, dir, "state", "show", "s.mqb", "a")
	if code != 0 || !strings.Contains(out, "namespace shared/orders (shared with other routes on purpose) in ") || !strings.Contains(out, ": 12 live keys") {
		t.Fatalf("state show a: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = mqbc(t, dir, "state", "reset", "--yes", "s.mqb", "a")
	if code != 0 || !strings.Contains(out, "keeps namespace shared/orders") || !strings.Contains(out, "route a: state reset (checkpoint deleted)") {
		t.Fatalf("state reset a: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = mqbc(t, dir, "state", "show", "s.mqb", "a")
	if !strings.Contains(out, "checkpoint  none in ") || !strings.Contains(out, ": 12 live keys") {
		t.Errorf("after resetting a, want its checkpoint gone and the shared keys kept:\n%s", out)
	}
}

// TestStateResetWhileRunning: a Pebble store is locked by the run that
// has it open, so a reset then fails, naming the store, and changes
// nothing.
func TestStateResetWhileRunning(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "f.mqb", `route follow {
  from file { path = "in.jsonl", mode = subscribe }
  to file { path = "out.jsonl" }
}
`)
	writeOrders(t, dir, 0, 3)
	cmd := exec.Command(mqbcBin, "run", "--log-level", "info", "f.mqb")
	cmd.Dir = dir
	var errb syncBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(errb.String(), "route started") {
		if time.Now().After(deadline) {
			t.Fatalf("the route did not start:\n%s", errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, errOut, code := mqbc(t, dir, "state", "reset", "--yes", "f.mqb", "follow")
	if code != 1 || !strings.Contains(errOut, filepath.Join(dir, ".mqb", "state")+": another process has it open") {
		t.Fatalf("state reset of a running route: want exit 1 naming the locked store\nexit %d\n%s%s", code, out, errOut)
	}
}

// syncBuffer is a bytes.Buffer safe for a process's writes and a test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
