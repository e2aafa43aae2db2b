//go:build chaos

package chaos

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// httpServerSource feeds the route's own HTTP server. Its clients are what
// replays for it: each line is POSTed, again and again across refused
// connections, 503s and cut requests, until the route answers 2xx, which
// it does only once it committed past the record. The clients keep
// sending while mqbc is down between runs, so every run starts with
// requests waiting.
var httpServerSource = sourceCase{name: "http_server", follows: true, setup: func(t *testing.T, dir string) sourceSetup {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	lines := make(chan string, 1<<18) // more than a pair emits: emit never waits
	stop := make(chan struct{})
	// An answer waits for the route's next commit: many clients keep the
	// route busy.
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: time.Minute}
			for {
				select {
				case <-stop:
					return
				case l := <-lines:
					for !postCommitted(c, "http://"+addr+"/orders", l) {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
						}
					}
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop); wg.Wait() })
	// An answer comes at the commit after the record's write: committing
	// every 10 ms instead of 100 answers the clients ten times as fast,
	// and the runs killed commit many times before their kill.
	return sourceSetup{from: fmt.Sprintf(`http_server { address = %q, path = "/orders" }`, addr),
		args: []string{"--commit-interval", "10ms"},
		emit: func(t *testing.T, chunk string) {
			for _, l := range strings.Split(strings.TrimSuffix(chunk, "\n"), "\n") {
				lines <- l
			}
		}}
}}

// postCommitted posts one record and reports whether the route answered
// 2xx (committed past it).
func postCommitted(c *http.Client, url, line string) bool {
	resp, err := c.Post(url, "application/json", strings.NewReader(line))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}
