package testsrv

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// S3Server is an in-process S3 emulator (gofakes3 over its in-memory
// backend) on 127.0.0.1, private to one test. It addresses buckets in the
// path (path-style), honours If-None-Match: * on PutObject, and checks no
// signature: any access key will do. Stop and Start take it off and back
// on the network without losing its objects, to simulate an outage.
type S3Server struct {
	httpOnPort
	backend *s3mem.Backend
	ignore  atomic.Bool // drop If-None-Match from PutObject requests
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
	s := &S3Server{backend: backend}
	fake := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	s.httpOnPort = httpOnPort{addr: ln.Addr().String(), handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && s.ignore.Load() {
			r.Header.Del("If-None-Match")
		}
		fake.ServeHTTP(w, r)
	})}
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

// IgnoreIfNoneMatch makes the emulator answer as a server without
// conditional writes does (as S3 itself did before August 2024): it
// ignores If-None-Match on PutObject and replaces the object.
func (s *S3Server) IgnoreIfNoneMatch(ignore bool) { s.ignore.Store(ignore) }

// Endpoint is the emulator's URL, http://127.0.0.1:PORT, for an S3
// client's endpoint (with path-style addressing).
func (s *S3Server) Endpoint() string { return "http://" + s.addr }

// Backend is the emulator's storage, for tests that inspect or remove
// objects behind the code under test.
func (s *S3Server) Backend() gofakes3.Backend { return s.backend }

// Client is an AWS SDK S3 client of the emulator (path-style, the
// credentials of S3Env).
func (s *S3Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:                     "us-east-1",
		BaseEndpoint:               aws.String(s.Endpoint()),
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider("mqb-test", "mqb-test-secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	})
}
