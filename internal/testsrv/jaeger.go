package testsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Jaeger here is Jaeger v2 (built on the OpenTelemetry Collector) with its
// in-memory trace store: a real OTLP/HTTP receiver whose query API shows
// what it received. It is not in Debian nor a dependency of ours, so the
// first test binary on a machine builds the pinned version from the Go
// module proxy into $TMPDIR/mqb-testsrv-cache, in a throwaway module that
// requires it as a tool (its own go.mod has replace directives, which
// `go install pkg@version` refuses), and later ones reuse the binary.
// MQB_JAEGER names a jaeger binary to use instead.
const jaegerVersion = "v1.76.0"

// JaegerServer is a Jaeger v2 run on 127.0.0.1: OTLP/HTTP in, the query
// API out.
type JaegerServer struct {
	procServer
	otlpPort, queryPort, healthPort int
}

var sharedJaeger sharedServer[*JaegerServer]

// Jaeger returns the Jaeger the test binary shares, starting it on first
// use. Tests sharing it tell their traces apart by service name.
func Jaeger(t testing.TB) *JaegerServer {
	t.Helper()
	if hidden("jaeger") {
		unavailable(t, "jaeger", "Jaeger hidden by %s", HideEnv)
	}
	bin := jaegerTool.binary(t)
	return sharedJaeger.get(t, "Jaeger", "jaeger", func(dir string) (*JaegerServer, error) {
		return startJaeger(bin, dir)
	})
}

// jaegerTool is Jaeger v2 built from the module proxy, or MQB_JAEGER.
var jaegerTool = &goTool{
	name: "jaeger", what: "an OTLP receiver, Jaeger", version: jaegerVersion, env: "MQB_JAEGER",
	build: func(dir string) error {
		return buildGoTool(dir, "github.com/jaegertracing/jaeger/cmd/jaeger", jaegerVersion, "jaeger")
	},
}

func startJaeger(bin, dir string) (*JaegerServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "config.yaml")
	s := &JaegerServer{}
	s.procServer = procServer{
		name: "Jaeger", dir: dir, logName: "jaeger.log",
		command: func() (string, []string, error) {
			return bin, []string{"--config", conf}, nil
		},
		ready: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.QueryURL()+"/api/services", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("query API: %s", resp.Status)
			}
			return nil
		},
		readyTimeout: 60 * time.Second,
		stopSignal:   syscall.SIGTERM,
		grace:        10 * time.Second,
	}
	err := s.startOnFreePorts(4, func(ports []int) error {
		s.otlpPort, s.queryPort, s.healthPort = ports[0], ports[1], ports[2]
		c := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, s.queryPort, ports[3], s.otlpPort)
		return os.WriteFile(conf, []byte(c), 0o644)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// TracesURL is the OTLP/HTTP traces endpoint.
func (s *JaegerServer) TracesURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/v1/traces", s.otlpPort)
}

// QueryURL is the base of Jaeger's query API.
func (s *JaegerServer) QueryURL() string { return fmt.Sprintf("http://127.0.0.1:%d", s.queryPort) }

// JaegerSpan is a span as Jaeger's query API returns it.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// Tag returns the value of the span's tag key, nil when it has none.
func (sp JaegerSpan) Tag(key string) any {
	for _, t := range sp.Tags {
		if t.Key == key {
			return t.Value
		}
	}
	return nil
}

// Traces returns the spans of every trace of service, grouped by trace id.
func (s *JaegerServer) Traces(service string) (map[string][]JaegerSpan, error) {
	u := s.QueryURL() + "/api/traces?limit=100000&lookback=1h&service=" + url.QueryEscape(service)
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaeger query: %s", resp.Status)
	}
	var body struct {
		Data []struct {
			TraceID string       `json:"traceID"`
			Spans   []JaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("jaeger query: %w", err)
	}
	out := map[string][]JaegerSpan{}
	for _, tr := range body.Data {
		out[tr.TraceID] = append(out[tr.TraceID], tr.Spans...)
	}
	return out, nil
}
