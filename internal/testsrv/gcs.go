package testsrv

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// GCSServer is an in-process GCS emulator (fake-gcs-server) on
// 127.0.0.1, private to one test and kept in memory.
type GCSServer struct {
	srv *fakestorage.Server
}

// GCS starts a GCS emulator for this test with the given buckets and
// returns the JSON API endpoint, http://127.0.0.1:PORT/storage/v1/, and a
// cloud.google.com/go/storage client connected to it. Code under test
// connects the same way: option.WithEndpoint(endpoint) and
// option.WithoutAuthentication(). The server stops when the test ends.
func GCS(t testing.TB, buckets ...string) (endpoint string, client *storage.Client) {
	t.Helper()
	s := NewGCS(t, buckets...)
	return s.Endpoint(), s.Client(t)
}

// NewGCS is GCS returning a handle on the server.
func NewGCS(t testing.TB, buckets ...string) *GCSServer {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testsrv: %v", err)
	}
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		Port:   uint16(port),
		// The client reads objects through the XML API at the endpoint's
		// host; the emulator serves that API only on its public host.
		PublicHost: fmt.Sprintf("127.0.0.1:%d", port),
		Writer:     io.Discard,
	})
	if err != nil {
		t.Fatalf("testsrv: start GCS emulator: %v", err)
	}
	t.Cleanup(srv.Stop)
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return &GCSServer{srv: srv}
}

// Endpoint is the JSON API endpoint to pass to option.WithEndpoint.
func (s *GCSServer) Endpoint() string { return s.srv.URL() + "/storage/v1/" }

// EmulatorHost is 127.0.0.1:PORT, the value for STORAGE_EMULATOR_HOST when
// the code under test runs as another process and only honours that
// variable.
func (s *GCSServer) EmulatorHost() string {
	return strings.TrimPrefix(s.srv.URL(), "http://")
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
