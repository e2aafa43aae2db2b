package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// mqbcBin is the real mqbc binary, built once by TestMain.
var mqbcBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mqbc-test")
	if err != nil {
		panic(err)
	}
	mqbcBin = filepath.Join(dir, "mqbc")
	if out, err := exec.Command("go", "build", "-o", mqbcBin, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	testsrv.StopAll() // servers a test started (state_sql_test.go)
	os.RemoveAll(dir)
	os.Exit(code)
}

// mqbc runs the binary in dir and returns stdout, stderr and the exit code.
func mqbc(t *testing.T, dir string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(mqbcBin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const goodSrc = `route orders_to_db {
  guarantee effectively_once
  from file { path = "orders.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  to sql {
    url          = "postgres://mqb:hunter2@127.0.0.1/shop"
    insert_query = """
      INSERT INTO orders (id, body)
      VALUES (${meta["mqb.id"]}, ${payload.body})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`

const badSrc = `route r {
  from file { path = "a.jsonl" }
  to sqll { url = "sqlite://a.db" }
}
`

func TestBuildOK(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "orders.mqb", goodSrc)
	out, errs, code := mqbc(t, dir, "build", "orders.mqb", "-o", "plan.json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	want := "orders_to_db: effectively-once\n  identity: id payload.order_id (stable)\n  dedup elided: ON CONFLICT (id) DO NOTHING keeps the first row of meta[\"mqb.id\"] and absorbs its repeats, as the dedup would (they count as deduplicated; keep = true runs the dedup)\n  write: ON CONFLICT (id) DO NOTHING\n"
	if !strings.HasPrefix(out, want) {
		t.Errorf("stdout = %q, want prefix %q", out, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("hunter2")) || !bytes.Contains(b, []byte("postgres://mqb:xxxxx@127.0.0.1/shop")) {
		t.Errorf("plan does not redact the password:\n%s", b)
	}
	var p struct {
		Version int
		Routes  []struct {
			Name, Guarantee string
			Reasons         []string
		}
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Version != 1 || len(p.Routes) != 1 || p.Routes[0].Guarantee != "effectively-once" {
		t.Errorf("plan = %+v, err %v", p, err)
	}
}

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "bad.mqb", badSrc)
	out, errs, code := mqbc(t, dir, "build", "bad.mqb")
	if code != exitError {
		t.Fatalf("exit %d, want 1", code)
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
	want := "bad.mqb:3:6: error[E012]: unknown endpoint kind \"sqll\" after to in route r\n 3 |   to sqll { url = \"sqlite://a.db\" }\n   |      ^^^^\n  = did you mean \"sql\"?"
	if !strings.HasPrefix(errs, want) {
		t.Errorf("stderr =\n%s\nwant prefix\n%s", errs, want)
	}
	_, errs, code = mqbc(t, dir, "build", "--format", "json", "bad.mqb")
	var ds []struct{ Code, Severity string }
	if code != exitError || json.Unmarshal([]byte(errs), &ds) != nil || len(ds) != 1 || ds[0].Code != "E012" || ds[0].Severity != "error" {
		t.Errorf("json diagnostics: exit %d\n%s", code, errs)
	}
	_, errs, code = mqbc(t, dir, "build", "missing.mqb")
	if code != exitError || !strings.Contains(errs, "missing.mqb") {
		t.Errorf("missing file: exit %d, stderr %q", code, errs)
	}
}

func TestWarningsDoNotFail(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "w.mqb", `route r {
  from file { path = "a.jsonl" }
  to sql { url = "sqlite://a.db", insert_query = "INSERT INTO t (id) VALUES (${payload.id})" }
}
`)
	out, errs, code := mqbc(t, dir, "build", "w.mqb")
	if code != exitOK || !strings.Contains(errs, "warning[W006]") || !strings.HasPrefix(out, "r: at-least-once") {
		t.Errorf("exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.mqb", goodSrc)
	for _, args := range [][]string{
		{},
		{"nosuchcommand"},
		{"build"},
		{"build", "--nosuchflag", "a.mqb"},
		{"build", "--format", "yaml", "a.mqb"},
		{"graph", "--format", "png", "a.mqb"},
		{"explain", "E999"},
	} {
		if _, _, code := mqbc(t, dir, args...); code != exitUsage {
			t.Errorf("mqbc %q: exit %d, want 2", args, code)
		}
	}
}

func TestExplain(t *testing.T) {
	out, _, code := mqbc(t, t.TempDir(), "explain", "e012")
	if code != exitOK || !strings.HasPrefix(out, "E012: unknown endpoint kind (error)") || !strings.Contains(out, "to sqll") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	out, _, code = mqbc(t, t.TempDir(), "explain")
	if code != exitOK || !strings.Contains(out, "W007") {
		t.Errorf("list: exit %d:\n%s", code, out)
	}
}

func TestGraph(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.mqb", strings.Replace(goodSrc, "ttl = 1h }", "ttl = 1h, keep = true }", 1))
	out, errs, code := mqbc(t, dir, "graph", "a.mqb")
	if code != exitOK || !strings.HasPrefix(out, "digraph mqb {") || !strings.Contains(out, `"orders_to_db/n0" -> "orders_to_db/n1"`) {
		t.Errorf("dot: exit %d\n%s%s", code, out, errs)
	}
	// Nodes name what they read and write, and a step its key.
	for _, want := range []string{`[label="from file orders.jsonl"]`, `[label="dedup meta[\"mqb.id\"]"]`, `[label="to sql orders"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("dot lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("dot shows the password:\n%s", out)
	}
	out, _, code = mqbc(t, dir, "graph", "--format", "mermaid", "a.mqb")
	if code != exitOK || !strings.HasPrefix(out, "flowchart LR") || !strings.Contains(out, "r0_n0 --> r0_n1") {
		t.Errorf("mermaid: exit %d\n%s", code, out)
	}
}

func TestVersion(t *testing.T) {
	out, errs, code := mqbc(t, t.TempDir(), "version")
	if code != exitOK || !regexp.MustCompile(`^mqbc \S+, (commit [0-9a-f]{12}( with uncommitted changes)?, )?go1\.[0-9]+`).MatchString(out) {
		t.Errorf("mqbc version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, _, code := mqbc(t, t.TempDir(), "version", "extra"); code != exitUsage {
		t.Errorf("mqbc version extra: exit %d, want %d", code, exitUsage)
	}
}
