package testsrv

import (
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// httpOnPort serves an in-process emulator's handler on a fixed
// 127.0.0.1 port that Stop and Start take off and back on the network,
// keeping the port and whatever the handler holds, to simulate an outage.
type httpOnPort struct {
	handler http.Handler
	addr    string

	mu   sync.Mutex
	http *http.Server
}

func (s *httpOnPort) serve(ln net.Listener) {
	hs := &http.Server{Handler: s.handler}
	s.mu.Lock()
	s.http = hs
	s.mu.Unlock()
	go hs.Serve(ln)
}

func (s *httpOnPort) stop() {
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
func (s *httpOnPort) Stop(t testing.TB) {
	t.Helper()
	s.stop()
}

// Start puts a stopped emulator back on its address.
func (s *httpOnPort) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	running := s.http != nil
	s.mu.Unlock()
	if running {
		return
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		t.Fatalf("testsrv: restart emulator on %s: %v", s.addr, err)
	}
	s.serve(ln)
}

// Restart stops the emulator, waits for downtime, and starts it again.
func (s *httpOnPort) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	s.Stop(t)
	time.Sleep(downtime)
	s.Start(t)
}
