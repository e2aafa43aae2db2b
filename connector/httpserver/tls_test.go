package httpserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mqb test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// With a certificate and key the server speaks HTTPS only.
func TestHTTPServerTLS(t *testing.T) {
	d := t.TempDir()
	cert, key, pool := selfSigned(t, d)
	addr, db := freeAddr(t), filepath.Join(d, "orders.db")
	r := startRoute(t, ordersRoute(addr, db, `, tls_cert_file = "`+cert+`", tls_key_file = "`+key+`"`, `${payload.order_id}`), addr)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
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
	d := t.TempDir()
	cert, key, _ := selfSigned(t, d)
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
