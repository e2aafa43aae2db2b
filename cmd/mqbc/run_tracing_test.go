//go:build jaeger

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestRunTracing (go test -tags jaeger ./cmd/mqbc -run Tracing) runs a route with tracing on against a real OTLP receiver
// (Jaeger) and reads back what it received: every batch read is one trace
// whose records add up to the lines read, with its read, steps and sink
// write spans under the batch span, a DLQ write where bad lines were, and
// commit spans. It is behind a build tag because building Jaeger from the
// module proxy costs about 19 CPU-minutes, more than the rest of CI's Go
// builds; the span structure itself is tested on every run with the SDK's
// recorder (runtime/tracing_test.go). MQB_JAEGER names a prebuilt binary.
func TestRunTracing(t *testing.T) {
	j := testsrv.Jaeger(t)
	tests := []struct {
		name string
		env  func(service string) []string
		args []string
	}{
		{"flag", func(s string) []string { return []string{"OTEL_SERVICE_NAME=" + s} }, []string{"--otlp-endpoint", j.TracesURL()}},
		{"env", func(s string) []string {
			return []string{"OTEL_SERVICE_NAME=" + s, "OTEL_EXPORTER_OTLP_ENDPOINT=" + strings.TrimSuffix(j.TracesURL(), "/v1/traces")}
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "r.mqb", tracedRoute)
			const lines = 5000
			var in strings.Builder
			bad := 0
			for i := range lines {
				if i%1000 == 7 {
					in.WriteString("{not json\n")
					bad++
					continue
				}
				fmt.Fprintf(&in, "{\"id\":\"o-%d\",\"qty\":%d}\n", i, i%10)
			}
			write(t, dir, "in.jsonl", in.String())
			service := fmt.Sprintf("mqb-test-%s-%d", tc.name, time.Now().UnixNano())
			cmd := mqbcCmd(dir, append([]string{"run", "r.mqb", "--progress", "off"}, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env(service)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("mqbc run: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), fmt.Sprintf("in %d,", lines)) {
				t.Fatalf("unexpected run output:\n%s", out)
			}

			var traces map[string][]testsrv.JaegerSpan
			var records, commits, dlqWrites, unwritten int
			deadline := time.Now().Add(60 * time.Second)
			for {
				traces, err = j.Traces(service)
				if err != nil {
					t.Fatal(err)
				}
				records, commits, dlqWrites = 0, 0, 0
				// Every batch span is the parent of a sink write or linked
				// from one (Jaeger shows a link as a FOLLOWS_FROM reference).
				written, batches := map[string]bool{}, map[string]bool{}
				for _, spans := range traces {
					for _, sp := range spans {
						if sp.OperationName == "mqb.batch" {
							batches[sp.SpanID] = true
						}
						if sp.OperationName == "mqb.sink.write" {
							for _, ref := range sp.References {
								written[ref.SpanID] = true
							}
						}
					}
				}
				unwritten = 0
				for id := range batches {
					if !written[id] {
						unwritten++
					}
				}
				for id, spans := range traces {
					byID := map[string]testsrv.JaegerSpan{}
					for _, sp := range spans {
						byID[sp.SpanID] = sp
					}
					for _, sp := range spans {
						switch sp.OperationName {
						case "mqb.batch":
							records += tagInt(t, sp, "mqb.records")
							checkChildren(t, id, sp, spans)
						case "mqb.commit":
							commits++
						case "mqb.dlq.write":
							dlqWrites++
						}
						for _, ref := range sp.References {
							if ref.RefType == "CHILD_OF" && byID[ref.SpanID].OperationName != "mqb.batch" {
								t.Errorf("trace %s: %s is a child of %q, want mqb.batch", id, sp.OperationName, byID[ref.SpanID].OperationName)
							}
						}
					}
				}
				if records >= lines && unwritten == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if records != lines {
				t.Errorf("batch spans hold %d records, want the %d read", records, lines)
			}
			if unwritten > 0 {
				t.Errorf("%d batch spans neither hold nor are linked from a mqb.sink.write", unwritten)
			}
			if commits == 0 {
				t.Error("no mqb.commit span")
			}
			if dlqWrites == 0 {
				t.Errorf("no mqb.dlq.write span for the %d bad lines", bad)
			}
		})
	}
}

func checkChildren(t *testing.T, trace string, batch testsrv.JaegerSpan, spans []testsrv.JaegerSpan) {
	t.Helper()
	if r := tagString(batch, "mqb.route"); r != "r" {
		t.Errorf("trace %s: mqb.route = %q", trace, r)
	}
	have := map[string]bool{}
	for _, sp := range spans {
		for _, ref := range sp.References {
			if ref.RefType == "CHILD_OF" && ref.SpanID == batch.SpanID {
				have[sp.OperationName] = true
			}
		}
	}
	// The sink write is checked across traces: a batch written with others
	// has it in the group's first trace, linked to the others.
	for _, want := range []string{"mqb.read", "mqb.steps"} {
		if !have[want] {
			t.Errorf("trace %s: batch span has no %s child (children: %v)", trace, want, have)
		}
	}
}

func tagInt(t *testing.T, sp testsrv.JaegerSpan, key string) int {
	t.Helper()
	switch v := sp.Tag(key).(type) {
	case float64:
		return int(v)
	}
	t.Errorf("span %s: tag %s = %v, want a number", sp.OperationName, key, sp.Tag(key))
	return 0
}

func tagString(sp testsrv.JaegerSpan, key string) string {
	s, _ := sp.Tag(key).(string)
	return s
}
