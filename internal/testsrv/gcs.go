package testsrv

import (
	"context"
	"io"
	"net"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// GCSServer is an in-process GCS emulator (fake-gcs-server) on
// 127.0.0.1, private to one test and kept in memory. Stop and Start take
// it off and back on the network without losing its objects, to simulate
// an outage.
type GCSServer struct {
	httpOnPort
	srv *fakestorage.Server
}

// GCS starts a GCS emulator for this test with the given buckets and
// returns the JSON API endpoint, http://127.0.0.1:PORT/storage/v1/, and a
// cloud.google.com/go/storage client connected to it. Code under test
// connects the same way: option.WithEndpoint(endpoint) and
// option.WithoutAuthentication(), or only STORAGE_EMULATOR_HOST set to
// EmulatorHost(). The server stops when the test ends.
func GCS(t testing.TB, buckets ...string) (endpoint string, client *storage.Client) {
	t.Helper()
	s := NewGCS(t, buckets...)
	return s.Endpoint(), s.Client(t)
}

// NewGCS is GCS returning a handle on the server.
func NewGCS(t testing.TB, buckets ...string) *GCSServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsrv: GCS emulator: %v", err)
	}
	addr := ln.Addr().String()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		// We serve its handler ourselves so that Stop and Start keep the
		// port and the objects.
		NoListener: true,
		// The client reads objects through the XML API at the endpoint's
		// host; the emulator serves that API only on its public host.
		PublicHost: addr,
		// Where resumable uploads continue (the Location header).
		ExternalURL: "http://" + addr,
		Writer:      io.Discard,
	})
	if err != nil {
		ln.Close()
		t.Fatalf("testsrv: start GCS emulator: %v", err)
	}
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	s := &GCSServer{srv: srv, httpOnPort: httpOnPort{handler: srv.HTTPHandler(), addr: addr}}
	s.serve(ln)
	t.Cleanup(func() {
		s.stop()
		srv.Stop()
	})
	return s
}

// Endpoint is the JSON API endpoint to pass to option.WithEndpoint.
func (s *GCSServer) Endpoint() string { return "http://" + s.addr + "/storage/v1/" }

// EmulatorHost is 127.0.0.1:PORT, the value for STORAGE_EMULATOR_HOST when
// the code under test runs as another process and only honours that
// variable.
func (s *GCSServer) EmulatorHost() string {
	return s.addr
}

// Server is the emulator, for tests that inspect or seed its objects.
func (s *GCSServer) Server() *fakestorage.Server { return s.srv }

// Client returns a real storage client connected to the emulator, closed
// when the test ends. (The emulator's own Client() uses an in-memory
// transport whose object reads fail with current client versions.)
func (s *GCSServer) Client(t testing.TB) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint(s.Endpoint()), option.WithoutAuthentication())
	if err != nil {
		t.Fatalf("testsrv: GCS client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
