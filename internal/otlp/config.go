package otlp

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config is where and how spans are exported. The zero Config (no
// Endpoint) turns tracing off.
type Config struct {
	// Endpoint is the full traces URL, e.g. http://127.0.0.1:4318/v1/traces.
	Endpoint string
	// Headers go with every export request (an API key).
	Headers map[string]string
	// Service is the service.name resource attribute (default "mqb").
	Service string
	// Version is the service.version resource attribute.
	Version string
}

// FromEnv reads the standard OpenTelemetry variables through getenv:
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (the base URL, to which /v1/traces is
// added), OTEL_EXPORTER_OTLP_TRACES_HEADERS or OTEL_EXPORTER_OTLP_HEADERS
// (k=v,k=v, values URL-encoded), OTEL_SERVICE_NAME, and
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, of which only the HTTP ones are
// accepted: grpc is refused with an error rather than ignored, since the
// spans would go nowhere.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if u := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
		c.Endpoint = u
	} else if u := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); u != "" {
		c.Endpoint = strings.TrimRight(u, "/") + "/v1/traces"
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", "http/json", "http/protobuf":
	default:
		if c.Endpoint != "" {
			return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: mqb exports traces over OTLP/HTTP only (JSON bodies, which every OTLP/HTTP receiver accepts); point the endpoint at the receiver's HTTP port (4318 by default)", proto)
		}
	}
	h := getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
	if h == "" {
		h = getenv("OTEL_EXPORTER_OTLP_HEADERS")
	}
	var err error
	if c.Headers, err = ParseHeaders(h); err != nil {
		return c, err
	}
	c.Service = getenv("OTEL_SERVICE_NAME")
	return c, nil
}

// ParseHeaders reads k=v,k=v with URL-encoded keys and values.
func ParseHeaders(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("OTLP headers: %q is not key=value", kv)
		}
		var err error
		if k, err = url.QueryUnescape(strings.TrimSpace(k)); err != nil {
			return nil, fmt.Errorf("OTLP headers: %q: %w", kv, err)
		}
		if v, err = url.QueryUnescape(strings.TrimSpace(v)); err != nil {
			return nil, fmt.Errorf("OTLP headers: %q: %w", kv, err)
		}
		out[k] = v
	}
	return out, nil
}

// Provider is a tracer provider exporting through an Exporter, and how to
// flush it when the process ends.
type Provider struct {
	*sdktrace.TracerProvider
}

// NewProvider starts a provider batching spans to c.Endpoint. The endpoint
// must be an http or https URL.
func NewProvider(c Config) (*Provider, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want an http:// or https:// URL such as http://127.0.0.1:4318/v1/traces", c.Endpoint)
	}
	service := c.Service
	if service == "" {
		service = "mqb"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if c.Version != "" {
		attrs = append(attrs, attribute.String("service.version", c.Version))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(NewExporter(c.Endpoint, c.Headers),
			sdktrace.WithBatchTimeout(time.Second),
			sdktrace.WithExportTimeout(10*time.Second)),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp}, nil
}

// Close flushes the spans still queued, waiting at most until ctx ends.
func (p *Provider) Close(ctx context.Context) error {
	return p.Shutdown(ctx)
}
