package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter sends spans to one OTLP/HTTP traces endpoint as JSON. It
// implements the SDK's SpanExporter; the SDK's batch span processor calls
// it from one goroutine.
type Exporter struct {
	url     string
	headers map[string]string
	client  *http.Client

	mu     sync.Mutex
	closed bool
}

// NewExporter sends to url, the full traces endpoint (…/v1/traces), with
// headers added to every request.
func NewExporter(url string, headers map[string]string) *Exporter {
	return &Exporter{url: url, headers: headers, client: &http.Client{Timeout: 10 * time.Second}}
}

// ExportSpans posts spans as one request. A receiver that says it is busy
// (429, 502, 503, 504) or a failed connection is retried with backoff
// until ctx ends; spans are diagnostics, so after that they are dropped
// with the error, and the route never waits on them longer than the
// processor's export timeout.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed || len(spans) == 0 {
		return nil
	}
	body, err := encode(spans)
	if err != nil {
		return fmt.Errorf("otlp: encode %d spans: %w", len(spans), err)
	}
	wait := 100 * time.Millisecond
	for {
		retry, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (e *Exporter) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("otlp: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return true, fmt.Errorf("otlp: post spans: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return true, fmt.Errorf("otlp: %s: %s: %s", e.url, resp.Status, bytes.TrimSpace(msg))
	}
	return false, fmt.Errorf("otlp: %s refused the spans: %s: %s", e.url, resp.Status, bytes.TrimSpace(msg))
}

// Shutdown stops exporting; spans handed over later are dropped.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.client.CloseIdleConnections()
	return nil
}
