package http

import (
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
)

// BenchmarkHTTPSink: file → id → http POST per record to a local server
// that reads and discards each body (the client, its 16 requests in flight
// and the connection reuse are what is measured).
func BenchmarkHTTPSink(b *testing.B) {
	const n = 20000
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(nethttp.StatusNoContent)
	}))
	defer srv.Close()
	input, size := plantest.BenchInput(b, n)
	runtest.Bench(b, n, size, func(i int, state string) plan.Plan {
		return plantest.SinkPlan(input, state, 1024, plan.Node{Kind: "http", Attrs: map[string]plan.Value{
			"url": plantest.Tmpl(plantest.Lit(srv.URL+"/orders/"), plantest.Ex(`meta["mqb.id"]`))}})
	})
}
