package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunCommitInterval: --commit-interval sets how often routes commit,
// which an http_server client sees as its answer's wait (it is answered at
// the commit after its record is written). At 1m a POST is still
// unanswered after 2 s (the default 100 ms answers it in about that);
// the drain's commit answers it, and the record is in the sink. Out of
// range is a usage error.
func TestRunCommitInterval(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"0s", "500us", "2m"} {
		_, errOut, code := mqbc(t, dir, "run", "--commit-interval", bad, "x.mqb")
		if code != exitUsage || !strings.Contains(errOut, "--commit-interval: must be from 1ms to 1m") {
			t.Errorf("--commit-interval %s: exit %d, %q; want a usage error", bad, code, errOut)
		}
	}

	addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
	src := fmt.Sprintf(`route ingest {
  from http_server { address = %q, path = "/orders" }
  to file { path = "out.jsonl" }
}
`, addr)
	write(t, dir, "ingest.mqb", src)
	cmd, _, stderr := startRun(t, dir, "run", "--commit-interval", "1m", "ingest.mqb")
	defer cmd.Process.Kill()
	answered := make(chan int, 1)
	go func() {
		for {
			resp, err := http.Post("http://"+addr+"/orders", "application/json", strings.NewReader(`{"order_id":"o-1"}`))
			if err != nil {
				time.Sleep(20 * time.Millisecond) // not listening yet
				continue
			}
			resp.Body.Close()
			answered <- resp.StatusCode
			return
		}
	}()
	select {
	case code := <-answered:
		t.Fatalf("answered %d within 2 s: the commit interval is not 1m\n%s", code, stderr)
	case <-time.After(2 * time.Second):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case code := <-answered:
		if code/100 != 2 {
			t.Errorf("answered %d after the drain, want 2xx", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("not answered after the drain\n%s", stderr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mqbc run: %v\n%s", err, stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil || !strings.Contains(string(data), `"o-1"`) {
		t.Errorf("out.jsonl %q (%v), want the record", data, err)
	}
}
