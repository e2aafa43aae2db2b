package testsrv

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// NATSServer is an embedded NATS server with JetStream, private to one
// test. Stop and Start keep its port and JetStream store, so streams and
// consumers survive a restart.
type NATSServer struct {
	opts natsserver.Options

	mu  sync.Mutex
	srv *natsserver.Server
}

// NATS starts an embedded NATS server with JetStream on 127.0.0.1 for this
// test and returns its URL, nats://127.0.0.1:PORT. It shuts down when the
// test ends.
func NATS(t testing.TB) string {
	t.Helper()
	return NewNATS(t).URL()
}

// NewNATS is NATS returning a handle that can stop and restart the server.
func NewNATS(t testing.TB) *NATSServer {
	t.Helper()
	s := &NATSServer{opts: natsserver.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	if err := s.start(); err != nil {
		t.Fatalf("testsrv: start NATS: %v", err)
	}
	// Restarts must come back where clients expect them.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.stop)
	return s
}

func (s *NATSServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil && s.srv.Running() {
		return nil
	}
	opts := s.opts // the server keeps and mutates its options
	srv, err := natsserver.NewServer(&opts)
	if err != nil {
		return err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("not ready for connections on %s:%d after 10s", s.opts.Host, s.opts.Port)
	}
	s.srv = srv
	return nil
}

func (s *NATSServer) stop() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// URL is nats://127.0.0.1:PORT; it stays the same across Stop and Start.
func (s *NATSServer) URL() string {
	return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port)
}

// Server is the running embedded server, for tests that inspect it.
func (s *NATSServer) Server() *natsserver.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Stop shuts the server down; clients see the connection drop.
func (s *NATSServer) Stop(t testing.TB) {
	t.Helper()
	s.stop()
}

// Start starts a stopped server again on the same port and store.
func (s *NATSServer) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testsrv: restart NATS: %v", err)
	}
}

// Restart stops the server, waits for downtime, and starts it again.
func (s *NATSServer) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	s.Stop(t)
	time.Sleep(downtime)
	s.Start(t)
}
