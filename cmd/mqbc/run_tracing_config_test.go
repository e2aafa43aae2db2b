package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tracedRoute is file → id → filter → DLQ → SQLite.
const tracedRoute = `route r {
  from file { path = "in.jsonl" }
  id payload.id
  filter payload.qty > 5
  dlq {
    to file { path = "dlq.jsonl" }
  }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER)"
    insert_query = "INSERT INTO t (id, qty) VALUES (${meta[\"mqb.id\"]}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// TestRunTracingRefusesGRPC: OTLP over gRPC is not spoken, so asking for it
// stops the run before it reads a record instead of sending spans nowhere.
func TestRunTracingRefusesGRPC(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "r.mqb", tracedRoute)
	write(t, dir, "in.jsonl", "{\"id\":\"a\",\"qty\":9}\n")
	cmd := mqbcCmd(dir, "run", "r.mqb")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "OTLP/HTTP only") {
		t.Fatalf("want a refusal naming OTLP/HTTP, got %v:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.db")); err == nil {
		t.Error("the route ran although tracing was misconfigured")
	}
}

func mqbcCmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(mqbcBin, args...)
	cmd.Dir = dir
	return cmd
}
