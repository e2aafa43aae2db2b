package httpserver

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mqb-dev/mqb/internal/runtest"
)

const benchRecords, benchClients = 5000, 256

// BenchmarkHTTPServerToSQLite: benchClients clients POST benchRecords
// orders, each waiting for its 204, which comes once the order is
// committed in SQLite (ON CONFLICT (id) DO NOTHING). An answer waits for
// the route's next commit (every 100 ms), so the rate grows with the
// clients: about benchClients × 10 per second at most.
func BenchmarkHTTPServerToSQLite(b *testing.B) {
	for range b.N {
		b.StopTimer()
		addr, db := freeAddr(b), filepath.Join(b.TempDir(), "orders.db")
		bg := startRoute(b, ordersRoute(addr, db, "", `${payload.order_id}`), addr)
		b.StartTimer()
		postAll(b, "http://"+addr+"/orders")
		b.StopTimer()
		bg.Stop(b)
		if n := runtest.CountRows(b, db); n != benchRecords {
			b.Fatalf("%d rows, want %d", n, benchRecords)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkNetHTTPBaseline is the baseline of BenchmarkHTTPServerToSQLite:
// the same clients against a net/http server that reads each body and
// answers 204 at once, keeping nothing.
func BenchmarkNetHTTPBaseline(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	b.ResetTimer()
	for range b.N {
		postAll(b, "http://"+ln.Addr().String()+"/orders")
	}
	b.ReportMetric(float64(benchRecords)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// postAll posts benchRecords orders from benchClients clients, each
// expecting a 204.
func postAll(b *testing.B, url string) {
	work := make(chan int, benchRecords)
	for i := range benchRecords {
		work <- i
	}
	close(work)
	tr := &http.Transport{MaxIdleConnsPerHost: benchClients}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				resp, err := c.Post(url, "application/json", strings.NewReader(order(i)))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					b.Errorf("POST: %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
}
