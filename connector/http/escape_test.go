package http

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// TestHTTPURLEscapesRecordValues: a value read from the record is escaped
// for where it lands in the url, so a payload can never change the path,
// add query parameters or cut the url with a fragment; a value in the host
// that would end the host fails the record.
func TestHTTPURLEscapesRecordValues(t *testing.T) {
	srv := newHTTPServer(t, nil)
	s := newTestHTTPSink(t, map[string]plan.Value{"url": plantest.Tmpl(
		plantest.Lit(srv.URL+"/orders/"), plantest.Ex("payload.id"), plantest.Lit("/items?tag="), plantest.Ex("payload.tag"), plantest.Lit("&x=1"),
	)}, nil)
	for _, tc := range []struct {
		id, tag  string
		wantPath string // as sent
		wantTag  string
	}{
		{"../admin?x=1#", "a&x=2#f", "/orders/..%2Fadmin%3Fx=1%23/items", "a&x=2#f"},
		{"..", "", "/orders/%2E%2E/items", ""},
		{".", "b c", "/orders/%2E/items", "b c"},
		{"o-1", "plain", "/orders/o-1/items", "plain"},
		{"ü/%2F", "%26", "/orders/%C3%BC%2F%252F/items", "%26"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			before := len(srv.received())
			rec := testRecord(`{}`, map[string]any{"id": tc.id, "tag": tc.tag})
			if err := s.Write(context.Background(), []*runtime.Record{rec}); err != nil {
				t.Fatal(err)
			}
			hits := srv.received()
			if len(hits) != before+1 {
				t.Fatalf("%d requests, want 1", len(hits)-before)
			}
			h := hits[len(hits)-1]
			q, err := url.ParseQuery(h.query)
			if h.rawPath != tc.wantPath || err != nil || len(q) != 2 || q.Get("tag") != tc.wantTag || q.Get("x") != "1" || len(q["x"]) != 1 {
				t.Errorf("sent path %q query %q; want path %q, tag %q and x=1 only", h.rawPath, h.query, tc.wantPath, tc.wantTag)
			}
		})
	}

	// In the host, a record value that would end the host fails the record.
	host := newTestHTTPSink(t, map[string]plan.Value{"url": plantest.Tmpl(plantest.Lit("http://"), plantest.Ex("payload.host"), plantest.Lit("/x"))}, nil)
	if _, err := host.request(testRecord(`{}`, map[string]any{"host": "127.0.0.1/admin?"})); err == nil || !strings.Contains(err.Error(), "would change the url's host") {
		t.Errorf("host with a path: err %v", err)
	}
	if q, err := host.request(testRecord(`{}`, map[string]any{"host": "127.0.0.1:8080"})); err != nil || q.raw != "http://127.0.0.1:8080/x" {
		t.Errorf("host:port: %v", err)
	}
}

// TestHTTPURLConfigValuesVerbatim: a placeholder that reads no record (an
// env() token, a whole url from the environment) is spliced as written.
func TestHTTPURLConfigValuesVerbatim(t *testing.T) {
	srv := newHTTPServer(t, nil)
	t.Setenv("MQB_TEST_HOOK_URL", srv.URL+"/services/T0/B0")
	s := newTestHTTPSink(t, map[string]plan.Value{"url": plantest.Tmpl(plantest.Ex(`env("MQB_TEST_HOOK_URL")`), plantest.Lit("/"), plantest.Ex("payload.id"))}, nil)
	rec := testRecord(`{}`, map[string]any{"id": "a/b"})
	if err := s.Write(context.Background(), []*runtime.Record{rec}); err != nil {
		t.Fatal(err)
	}
	if h := srv.received(); len(h) != 1 || h[0].rawPath != "/services/T0/B0/a%2Fb" {
		t.Errorf("requests %+v, want one to /services/T0/B0/a%%2Fb", h)
	}
}
