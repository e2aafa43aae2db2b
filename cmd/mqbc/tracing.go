package main

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/mqb-dev/mqb/internal/otlp"
)

// otlpEndpointDoc documents --otlp-endpoint.
const otlpEndpointDoc = "export a trace per batch (read, steps, sink write, commit) over OTLP/HTTP to URL, e.g. http://127.0.0.1:4318/v1/traces; off by default. Without the flag, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT turn it on (OTEL_EXPORTER_OTLP_HEADERS and OTEL_SERVICE_NAME are read too)"

// startTracing returns the provider the runtime traces through, nil when
// no endpoint is configured, and a function flushing it at exit.
func startTracing(flagEndpoint string) (*otlp.Provider, func(), error) {
	cfg, err := otlp.FromEnv(os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	if flagEndpoint != "" {
		cfg.Endpoint = flagEndpoint
	}
	if cfg.Endpoint == "" {
		return nil, func() {}, nil
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		cfg.Version = bi.Main.Version
	}
	p, err := otlp.NewProvider(cfg)
	if err != nil {
		return nil, nil, err
	}
	return p, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx) // spans are diagnostics: a receiver gone at exit costs only them
	}, nil
}
