package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTap runs a route on a subscribed file with --metrics-addr, taps it
// after its map and at its sink with the real binary, appends lines, and
// sees them: at map#1 every record with the field map set, at the sink
// only those the filter kept. An unknown point is refused with the list.
func TestTap(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	write(t, dir, "in.jsonl", "")
	write(t, dir, "r.mqb", `route r {
  from file { path = "in.jsonl", mode = subscribe }
  map { tagged = true }
  filter payload.n % 2 == 0
  to file { path = "out.jsonl" }
}
`)
	run := exec.Command(mqbcBin, "run", "--log-level", "info", "--metrics-addr", "127.0.0.1:0", "r.mqb")
	run.Dir = dir
	runErr := &syncBuffer{}
	run.Stderr = runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Process.Kill(); run.Wait() })
	re := regexp.MustCompile(`url=http://(127\.0\.0\.1:[0-9]+)/metrics`)
	var addr string
	if !waitUntil(30*time.Second, func() bool {
		m := re.FindStringSubmatch(runErr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil && strings.Contains(runErr.String(), "route started")
	}) {
		t.Fatalf("run did not start:\n%s", runErr.String())
	}

	tap := func(target string, limit int) (*exec.Cmd, *syncBuffer, *syncBuffer) {
		cmd := exec.Command(mqbcBin, "tap", "--addr", addr, "--limit", fmt.Sprint(limit), target)
		out, errb := &syncBuffer{}, &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if !waitUntil(30*time.Second, func() bool { return strings.Contains(errb.String(), "watching route") }) {
			t.Fatalf("tap %s did not connect:\n%s", target, errb.String())
		}
		return cmd, out, errb
	}
	afterMap, mapOut, _ := tap("r.map", 4)
	atSink, sinkOut, _ := tap("r", 2)

	f, err := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 4; n++ {
		fmt.Fprintf(f, "{\"n\":%d}\n", n)
	}
	f.Close()
	for _, c := range []*exec.Cmd{afterMap, atSink} {
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tap: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("tap did not end after its limit; map: %q sink: %q", mapOut.String(), sinkOut.String())
		}
	}
	type line struct {
		At      string         `json:"at"`
		Payload map[string]any `json:"payload"`
	}
	read := func(s string) (got []string) {
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			var x line
			if err := json.Unmarshal([]byte(l), &x); err != nil {
				t.Fatalf("tap line %q: %v", l, err)
			}
			got = append(got, fmt.Sprintf("%s n=%v tagged=%v", x.At, x.Payload["n"], x.Payload["tagged"]))
		}
		return got
	}
	if got := strings.Join(read(mapOut.String()), "; "); got != "map n=1 tagged=true; map n=2 tagged=true; map n=3 tagged=true; map n=4 tagged=true" {
		t.Errorf("after map: %s", got)
	}
	if got := strings.Join(read(sinkOut.String()), "; "); got != "sink n=2 tagged=true; sink n=4 tagged=true" {
		t.Errorf("at the sink: %s", got)
	}

	_, errs, code := mqbc(t, dir, "tap", "--addr", addr, "r.dedup")
	if code != exitError || !strings.Contains(errs, `no tap point "dedup"; its points: source, map, filter, sink`) {
		t.Errorf("unknown point: exit %d, %q", code, errs)
	}
	run.Process.Signal(syscall.SIGTERM)
	run.Wait()
}
