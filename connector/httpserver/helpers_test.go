package httpserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// freeAddr is a 127.0.0.1 address with a port nothing listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ordersRoute is a route from an http_server on addr into the SQLite
// database db, one row per order; extra is more of the from block.
func ordersRoute(addr, db, extra, key string) string {
	return fmt.Sprintf(`route ingest {
  from http_server { address = %q, path = "/orders" %s }
  dlq { to file { path = %q } }
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, amount) VALUES (%s, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`, addr, extra, filepath.Join(filepath.Dir(db), "dlq.jsonl"), db, key)
}

// startRoute compiles src and runs it in the background until the
// server on addr answers; the test's cleanup stops it.
func startRoute(t testing.TB, src, addr string) *runtest.Background {
	t.Helper()
	r := runtest.Start(context.Background(), plantest.Compile(t, src), runtest.Options())
	if !listening(addr) {
		r.Stop(t)
		t.Fatalf("the http_server route did not listen on %s", addr)
	}
	return r
}

// waitListening waits for a server on addr.
func waitListening(t testing.TB, addr string) {
	t.Helper()
	if !listening(addr) {
		t.Fatalf("the http_server route did not listen on %s", addr)
	}
}

// listening reports whether a server comes to listen on addr within a
// minute.
func listening(addr string) bool {
	return runtest.WaitFor(func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, time.Minute, 20*time.Millisecond)
}

// post sends body to url with the headers given as name, value pairs and
// returns the status and the response body.
func post(t testing.TB, c *http.Client, url, body string, header ...string) (int, string) {
	t.Helper()
	return send(t, c, http.MethodPost, url, body, header...)
}

// send is post with any method.
func send(t testing.TB, c *http.Client, method, url, body string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func order(i int) string { return fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i) }
