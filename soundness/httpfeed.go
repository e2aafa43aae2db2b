package main

import (
	"hash/fnv"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The http_server source: each route serves POST /in on an address of its
// own. The clients are what replays for it: each line is POSTed to every
// route, again and again across refused connections, 503s and cut
// requests, until the route answers 2xx, which it does only once it
// committed past the record; a 4xx (a line that is not JSON) is final.
// The clients keep sending while mqbc is down between runs. A run has
// consumed what was fed once no line waits for its answer.
//
// Every line of one id goes through one client, one request after the
// other, so the route gets a key's records in the order of the input, as
// it does from the file: the lines of many clients arrive in any order,
// and which record of a key a first-wins table keeps would be timing.

var addressRE = regexp.MustCompile(`address\s*=\s*"127\.0\.0\.1:\d+"`)

// httpClients is how many requests wait for their answer at once: an
// answer waits for the route's next commit, so many keep it busy.
const httpClients = 64

// startHTTPClients gives every http_server of dir/routes.mqb a free port
// of 127.0.0.1 and starts the clients that feed them.
func startHTTPClients(dir, source string) (*srcHandle, error) {
	var urls []string
	var err error
	rewritten := addressRE.ReplaceAllStringFunc(source, func(string) string {
		ln, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			err = lerr
			return ""
		}
		addr := ln.Addr().String()
		ln.Close()
		urls = append(urls, "http://"+addr+"/in")
		return `address = "` + addr + `"`
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "routes.mqb"), []byte(rewritten), 0o644); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var waiting atomic.Int64
	var wg sync.WaitGroup
	// queues[i][k] holds the lines client k sends to route i, in order.
	queues := make([][]chan string, len(urls))
	for i, u := range urls {
		queues[i] = make([]chan string, httpClients)
		for k := range queues[i] {
			q := make(chan string, 1<<14)
			queues[i][k] = q
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &http.Client{Timeout: time.Minute}
				for {
					select {
					case <-stop:
						return
					case l := <-q:
						for !postFinal(c, u, l) {
							select {
							case <-stop:
								return
							case <-time.After(50 * time.Millisecond):
							}
						}
						waiting.Add(-1)
					}
				}
			}()
		}
	}
	h := &srcHandle{}
	h.feed = func(chunk string) error {
		for _, l := range lines(chunk) {
			f := fnv.New32a()
			f.Write(recordKey(l))
			k := f.Sum32() % httpClients
			for i := range urls {
				waiting.Add(1)
				queues[i][k] <- l
			}
		}
		return nil
	}
	h.caughtUp = func() bool { return waiting.Load() == 0 }
	h.stop = func() { close(stop); wg.Wait() }
	return h, nil
}

// postFinal posts one line and reports whether the answer is final: 2xx
// (the route committed past the record) or 4xx (it never will).
func postFinal(c *http.Client, url, line string) bool {
	resp, err := c.Post(url, "application/json", strings.NewReader(line))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2 || resp.StatusCode/100 == 4
}
