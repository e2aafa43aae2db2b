package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunCommitInterval: --commit-interval sets how often routes commit,
// which the committed_records metric shows. A record read from stdin and
// written is committed within 2 s at the default 100 ms, and still not
// at 1m; closing stdin ends the route, whose last commit covers it. Out
// of range is a usage error.
func TestRunCommitInterval(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{"0s", "500us", "2m"} {
		_, errOut, code := mqbc(t, dir, "run", "--commit-interval", bad, "x.mqb")
		if code != exitUsage || !strings.Contains(errOut, "--commit-interval: must be from 1ms to 1m") {
			t.Errorf("--commit-interval %s: exit %d, %q; want a usage error", bad, code, errOut)
		}
	}
	write(t, dir, "ingest.mqb", `route ingest {
  from stdin {}
  to file { path = "out.jsonl" }
}
`)
	for _, tc := range []struct {
		interval  string
		committed bool // soon after the record's write
	}{{"100ms", true}, {"1m", false}} {
		t.Run(tc.interval, func(t *testing.T) {
			addr := fmt.Sprintf("127.0.0.1:%d", closedPort(t))
			cmd := exec.Command(mqbcBin, "run", "--commit-interval", tc.interval, "--metrics-addr", addr, "ingest.mqb")
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			metric := func(name string) string {
				resp, err := http.Get("http://" + addr + "/metrics")
				if err != nil {
					return ""
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				for line := range strings.Lines(string(body)) {
					if v, ok := strings.CutPrefix(line, "mqb_"+name+`{route="ingest"} `); ok {
						return strings.TrimSpace(v)
					}
				}
				return ""
			}
			fmt.Fprintln(stdin, `{"order_id":"o-1"}`)
			if !waitUntil(30*time.Second, func() bool { return metric("records_out_total") == "1" }) {
				t.Fatalf("the record was not written\n%s", stderr.String())
			}
			// Not committed is waited for 2 s; committed, on a loaded
			// machine, up to 20.
			wait := 2 * time.Second
			if tc.committed {
				wait = 20 * time.Second
			}
			if got := waitUntil(wait, func() bool { return metric("committed_records") == "1" }); got != tc.committed {
				t.Fatalf("at --commit-interval %s, committed within %s of the write: %v, want %v\n%s", tc.interval, wait, got, tc.committed, stderr.String())
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("mqbc run: %v\n%s", err, stderr.String())
			}
		})
	}
	data, err := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if err != nil || strings.Count(string(data), `"o-1"`) != 2 {
		t.Errorf("out.jsonl %q (%v), want the record of each run", data, err)
	}
}
