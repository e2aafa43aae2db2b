package httpserver

import (
	"crypto/tls"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// With a certificate and key the server speaks HTTPS only.
func TestHTTPServerTLS(t *testing.T) {
	d := t.TempDir()
	certs := testsrv.TestCA(t)
	cert, key := certs.CertFile, certs.KeyFile
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	r := startRoute(t, ordersRoute(addr, db, `, tls_cert_file = "`+cert+`", tls_key_file = "`+key+`"`, `${payload.order_id}`), addr)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certs.Pool}}}
	if code, body := post(t, c, "https://"+addr+"/orders", order(1)); code != http.StatusNoContent {
		t.Fatalf("POST over TLS: %d %s", code, body)
	}
	if code, _ := post(t, &http.Client{Timeout: time.Minute}, "http://"+addr+"/orders", order(2)); code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS server answered %d, want 400", code)
	}
	runtest.CheckCounts(t, r.Stop(t).Route("ingest"))
	if n := runtest.CountRows(t, db); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}

// What the source cannot run with is refused at start-up, naming the
// attribute.
func TestHTTPServerRefusedConfigs(t *testing.T) {
	certs := testsrv.TestCA(t)
	cert, key := certs.CertFile, certs.KeyFile
	for _, tc := range []struct {
		name, extra string
		names       []string
		replace     []string // old, new: an edit of the route's text
	}{
		{"cert without key", `, tls_cert_file = "` + cert + `"`, []string{"tls_cert_file", "without tls_key_file"}, nil},
		{"key without cert", `, tls_key_file = "` + key + `"`, []string{"tls_key_file", "without tls_cert_file"}, nil},
		{"key is no key", `, tls_cert_file = "` + cert + `", tls_key_file = "` + cert + `"`, []string{"tls_cert_file"}, nil},
		{"user without password", `, username = "ingest"`, []string{"password", "empty"}, nil},
		{"password without user", `, password = "${env(\"MQB_TEST_PW\")}"`, []string{"username", "empty"}, nil},
		{"path", "", []string{"path", "must start with /"}, []string{`path = "/orders"`, `path = "orders"`}},
		{"body bound", `, max_body_bytes = 0`, []string{"max_body_bytes", "positive"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MQB_TEST_PW", "pw")
			src := ordersRoute(freeAddr(t), filepath.Join(t.TempDir(), "orders.db"), tc.extra, `${payload.order_id}`)
			if tc.replace != nil {
				src = strings.Replace(src, tc.replace[0], tc.replace[1], 1)
			}
			runtest.RunRefused(t, plantest.Compile(t, src), tc.names)
		})
	}
}
