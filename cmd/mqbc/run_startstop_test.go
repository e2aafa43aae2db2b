package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A SIGTERM while a route is still starting (here its sql sink waits on
// a server that accepts the connection and never answers) drains the run
// like one after: exit 3 (interrupted) and a line saying nothing was
// read, not exit 1 with the start-up's "context canceled".
func TestSIGTERMWhileStartingIsADrain(t *testing.T) {
	addr, accepted := silentServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/in.jsonl", []byte("{\"id\":\"a\"}\n{\"id\":\"b\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "r.mqb", fmt.Sprintf(`route load {
  from file { path = "in.jsonl" }
  id payload.id
  to sql {
    url          = "postgres://mqb@%s/db?connect_timeout=120"
    insert_query = "INSERT INTO t (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING"
  }
}
`, addr))
	cmd, out, errb := startRun(t, dir, "run", "r.mqb")
	select {
	case <-accepted:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the sink never connected\nstderr:\n%s", errb)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("no exit 30 s after SIGTERM\nstderr:\n%s", errb)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
		t.Fatalf("exit %d after SIGTERM while starting, want %d\nstdout:\n%s\nstderr:\n%s", code, exitInterrupted, out, errb)
	}
	if !strings.Contains(out.String(), "interrupted: stopped while route load was starting") || !strings.Contains(out.String(), "no record was read") {
		t.Errorf("stdout does not say the start was interrupted:\n%s", out)
	}
	if strings.Contains(errb.String(), "mqbc run:") {
		t.Errorf("stderr reports an error:\n%s", errb)
	}
}

// While a drain waits on a sink (an http endpoint that takes the request
// and never answers), a second SIGTERM stops the process at once, as a
// crash would, instead of leaving SIGKILL as the only way out.
func TestSecondSignalStopsTheDrain(t *testing.T) {
	addr, requested := silentServer(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/in.jsonl", []byte("{\"id\":\"a\"}\n{\"id\":\"b\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "r.mqb", fmt.Sprintf(`route post {
  from file { path = "in.jsonl" }
  to http { url = "http://%s/in", timeout = 5m }
}
`, addr))
	cmd, out, errb := startRun(t, dir, "run", "r.mqb")
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-requested:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the sink never sent a request\nstderr:\n%s", errb)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		t.Fatalf("the run ended on the first SIGTERM with its write unanswered (exit %d)\nstdout:\n%s\nstderr:\n%s", cmd.ProcessState.ExitCode(), out, errb)
	case <-time.After(time.Second):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still draining 10 s after a second SIGTERM\nstderr:\n%s", errb)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("exit %v after the second SIGTERM, want death by SIGTERM\nstderr:\n%s", cmd.ProcessState, errb)
	}
	if !strings.Contains(errb.String(), "a second SIGINT or SIGTERM stops at once") {
		t.Errorf("the drain does not say a second signal stops it:\n%s", errb)
	}
}

// silentServer listens on 127.0.0.1 and holds every connection open
// without ever answering; got receives once a client has sent something
// (a PostgreSQL start-up message, an HTTP request).
func silentServer(t *testing.T) (addr string, got <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{}, 1)
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go func() {
				if n, _ := c.Read(make([]byte, 4096)); n > 0 {
					select {
					case sent <- struct{}{}:
					default:
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), sent
}
