package runtime_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/runtime"
)

// TestTracingSpans runs routes with a tracer recording spans in memory
// (the OpenTelemetry SDK's own recorder): every batch read is one trace
// whose records add up to what was read, with its stages as children; a
// route that fails marks the batch it could not deliver as failed.
func TestTracingSpans(t *testing.T) {
	tests := []struct {
		name    string
		dlq     bool
		failing bool // a bad line and no dlq: the route fails
	}{
		{"delivered", true, false},
		{"route fails", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			in := filepath.Join(d, "in.jsonl")
			var lines []string
			for i := range 2500 {
				if i == 1500 {
					lines = append(lines, "{bad")
					continue
				}
				lines = append(lines, fmt.Sprintf(`{"id":"o-%d","n":%d}`, i, i))
			}
			plantest.WriteLines(t, in, lines...)
			dlq := ""
			if tc.dlq {
				dlq = `dlq { to file { path = "` + filepath.Join(d, "dlq.jsonl") + `" } }`
			}
			src := fmt.Sprintf(`route r {
  from file { path = %q }
  id payload.id
  %s
  to file { path = %q }
}`, in, dlq, filepath.Join(d, "out.jsonl"))
			p := plantest.Compile(t, src)
			p.Routes[0].BatchSize = 500
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			opts := runtest.Options()
			opts.Tracer = tp
			opts.StateDir = d
			st, err := runtime.Run(context.Background(), p, opts)
			if tc.failing != (err != nil) {
				t.Fatalf("run error %v, want failing %v", err, tc.failing)
			}
			spans := rec.Ended()
			byParent := map[string][]string{}
			var records int64
			var failedBatches, commits int
			for _, s := range spans {
				if s.Parent().IsValid() {
					byParent[s.Parent().SpanID().String()] = append(byParent[s.Parent().SpanID().String()], s.Name())
				}
			}
			for _, s := range spans {
				switch s.Name() {
				case "mqb.batch":
					for _, a := range s.Attributes() {
						if a.Key == "mqb.records" {
							records += a.Value.AsInt64()
						}
					}
					kids := strings.Join(byParent[s.SpanContext().SpanID().String()], ",")
					if !strings.Contains(kids, "mqb.read") {
						t.Errorf("batch span without mqb.read child: %s", kids)
					}
					if s.Status().Code == codes.Error {
						failedBatches++
					} else if !strings.Contains(kids, "mqb.steps") {
						t.Errorf("delivered batch without mqb.steps child: %s", kids)
					}
				case "mqb.commit":
					commits++
				}
			}
			rs := st.Route("r")
			if records != rs.In {
				t.Errorf("batch spans hold %d records, the route read %d", records, rs.In)
			}
			if tc.failing && failedBatches == 0 {
				t.Error("the route failed but no batch span says so")
			}
			if !tc.failing && (failedBatches > 0 || commits == 0) {
				t.Errorf("failed batches %d, commits %d", failedBatches, commits)
			}
		})
	}
}
