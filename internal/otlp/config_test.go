package otlp

import (
	"maps"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		endpoint string
		headers  map[string]string
		service  string
		err      string
	}{
		{"off", nil, "", nil, "", ""},
		{"base endpoint gets the traces path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"},
			"http://127.0.0.1:4318/v1/traces", nil, "", ""},
		{"traces endpoint as is, over the base", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://a:4318",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://b/otlp/traces"},
			"https://b/otlp/traces", nil, "", ""},
		{"headers and service", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
			"OTEL_EXPORTER_OTLP_HEADERS":  "api-key=s%3Dcret, x-team = data",
			"OTEL_SERVICE_NAME":           "ingest"},
			"http://a:4318/v1/traces", map[string]string{"api-key": "s=cret", "x-team": "data"}, "ingest", ""},
		{"grpc refused", map[string]string{
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", nil, "", "OTLP/HTTP only"},
		{"grpc without an endpoint is not ours to refuse", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "", nil, "", ""},
		{"bad header", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "", nil, "", "not key=value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := FromEnv(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Endpoint != tc.endpoint || c.Service != tc.service || !maps.Equal(c.Headers, tc.headers) {
				t.Errorf("got %+v", c)
			}
		})
	}
}

func TestNewProviderRefusesNonHTTP(t *testing.T) {
	for _, u := range []string{"127.0.0.1:4318", "grpc://a:4317", "http://"} {
		if _, err := NewProvider(Config{Endpoint: u}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}
