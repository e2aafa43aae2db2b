package testsrv

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3Server is an in-process S3 emulator (gofakes3 over its in-memory
// backend) on 127.0.0.1, private to one test. It addresses buckets in the
// path (path-style), honours If-None-Match: * on PutObject, and checks no
// signature: any access key will do. Stop and Start take it off and back
// on the network without losing its objects, to simulate an outage.
type S3Server struct {
	backend *s3mem.Backend
	handler http.Handler
	addr    string

	mu     sync.Mutex
	http   *http.Server
	ignore bool // drop If-None-Match from PutObject requests
}

// S3Env is the environment the AWS SDK reads, pointing code under test
// (in this process through t.Setenv, or in a child process) at an S3
// emulator: static credentials, a region, and no instance metadata
// lookups.
func (s *S3Server) S3Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=mqb-test",
		"AWS_SECRET_ACCESS_KEY=mqb-test-secret",
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint(),
	}
}

// NewS3 starts an S3 emulator for this test with the given buckets. The
// server stops when the test ends.
func NewS3(t testing.TB, buckets ...string) *S3Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsrv: S3 emulator: %v", err)
	}
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			ln.Close()
			t.Fatalf("testsrv: S3 emulator: create bucket %s: %v", b, err)
		}
	}
	s := &S3Server{backend: backend, addr: ln.Addr().String(),
		handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()}
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

// IgnoreIfNoneMatch makes the emulator answer as a server without
// conditional writes does (as S3 itself did before August 2024): it
// ignores If-None-Match on PutObject and replaces the object.
func (s *S3Server) IgnoreIfNoneMatch(ignore bool) {
	s.mu.Lock()
	s.ignore = ignore
	s.mu.Unlock()
}

func (s *S3Server) serve(ln net.Listener) {
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		ignore := s.ignore
		s.mu.Unlock()
		if ignore && r.Method == http.MethodPut {
			r.Header.Del("If-None-Match")
		}
		s.handler.ServeHTTP(w, r)
	})}
	s.mu.Lock()
	s.http = hs
	s.mu.Unlock()
	go hs.Serve(ln)
}

func (s *S3Server) stop() {
	s.mu.Lock()
	hs := s.http
	s.http = nil
	s.mu.Unlock()
	if hs != nil {
		hs.Close()
	}
}

// Stop takes the emulator off the network: connections are closed and
// new ones refused. Its objects stay.
func (s *S3Server) Stop(t testing.TB) {
	t.Helper()
	s.stop()
}

// Start puts a stopped emulator back on its address.
func (s *S3Server) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	running := s.http != nil
	s.mu.Unlock()
	if running {
		return
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatalf("testsrv: restart S3 emulator on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// Restart stops the emulator, waits for downtime, and starts it again.
func (s *S3Server) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	s.Stop(t)
	time.Sleep(downtime)
	s.Start(t)
}

// Endpoint is the emulator's URL, http://127.0.0.1:PORT, for an S3
// client's endpoint (with path-style addressing).
func (s *S3Server) Endpoint() string { return "http://" + s.addr }

// Backend is the emulator's storage, for tests that inspect or remove
// objects behind the code under test.
func (s *S3Server) Backend() gofakes3.Backend { return s.backend }
