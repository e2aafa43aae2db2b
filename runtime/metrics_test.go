package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsAndProgress(t *testing.T) {
	e := newTestEnv(t)
	genDataset(t, e.input, 3000, 4)
	reg := prometheus.NewRegistry()
	var progress strings.Builder
	opts := testOptions(t)
	opts.Registerer = reg
	opts.Progress = &progress
	st, err := runtime.Run(context.Background(), sqlitePlan(e, 100, 1), opts)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route("orders")
	if !strings.Contains(progress.String(), "orders: 3000 records") || !strings.Contains(progress.String(), "100.0%") {
		t.Errorf("progress %q", progress.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := runtime.ServeMetrics(ctx, "127.0.0.1:0", reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`mqb_records_in_total{route="orders"} %d`, rs.In),
		fmt.Sprintf(`mqb_records_out_total{route="orders"} %d`, rs.Out),
		fmt.Sprintf(`mqb_records_deduplicated_total{route="orders"} %d`, rs.Deduplicated),
		fmt.Sprintf(`mqb_records_dead_lettered_total{route="orders"} %d`, rs.DeadLettered),
		`mqb_commit_lag_records{route="orders"} 0`,
		fmt.Sprintf(`mqb_committed_records{route="orders"} %d`, rs.Committed),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// A second run on the same registerer reuses the collectors.
	if _, err := runtime.Run(context.Background(), sqlitePlan(e, 100, 1), opts); err != nil {
		t.Fatal(err)
	}
}
