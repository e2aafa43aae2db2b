package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheck: mqbc check builds the routes and reports each (premises or
// none) without moving a record; a route that cannot start fails it.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "in.jsonl", `{"id": "a"}`+"\n")
	write(t, dir, "ok.mqb", `route copy {
  from file { path = "in.jsonl" }
  to file { path = "out.jsonl" }
}
`)
	out, errOut, code := mqbc(t, dir, "check", "ok.mqb")
	if code != 0 || !strings.Contains(out, "ok     copy: no premises to check") {
		t.Fatalf("check ok.mqb: exit %d\n%s%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.jsonl")); err == nil && len(b) > 0 {
		t.Errorf("check wrote %q to the sink's file: it must move no record", b)
	}
	write(t, dir, "bad.mqb", `route load {
  from file { path = "in.jsonl" }
  to sql {
    url = "sqlite://out.db"
    insert_query = "INSERT INTO missing (id) VALUES (${payload.id}) ON CONFLICT DO NOTHING"
  }
}
`)
	out, errOut, code = mqbc(t, dir, "check", "bad.mqb")
	if code != 1 || !strings.Contains(out, "FAILED load:") || !strings.Contains(out, "no such table: missing") {
		t.Fatalf("check bad.mqb: exit %d\n%s%s", code, out, errOut)
	}
}
