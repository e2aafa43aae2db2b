package runtime

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// BenchmarkHTTPSink: file → id → http POST per record to a local server
// that reads and discards each body (the client, its 16 requests in flight
// and the connection reuse are what is measured).
func BenchmarkHTTPSink(b *testing.B) {
	const n = 20000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	input, size := benchInput(b, n)
	benchRun(b, n, size, func(i int, state string) plan.Plan {
		e := testEnv{input: input, state: state}
		return brokerPlan(e, 1024, plan.Node{Kind: "http", Attrs: map[string]plan.Value{
			"url": tmplV(lit(srv.URL+"/orders/"), ex(`meta["mqb.id"]`))}})
	})
}
