package testsrv

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// procServer is the part of a server run as a child process that does not
// depend on which server it is: start it and wait until it answers, stop
// it, kill it, start it again on the same ports and data, hand out
// databases. PGServer, MariaDBServer, ClickHouseServer and KafkaProcess
// embed one and fill in what is their own: the command line and the
// readiness probe.
type procServer struct {
	name    string              // in messages: "PostgreSQL"
	dir     string              // the server's files, its log among them
	logName string              // the log file in dir
	cred    *syscall.Credential // the OS user the server runs as; nil for ours

	// command returns the binary and arguments of the next start; it is
	// called at each start, so it may depend on what an earlier start
	// learned (a port picked by the server).
	command func() (path string, args []string, err error)
	// ready is polled until it succeeds, the process exits or readyTimeout
	// passes. It runs with mu held, so it may record what it learns in the
	// server's fields but must not lock mu.
	ready        func(ctx context.Context) error
	readyTimeout time.Duration

	stopSignal syscall.Signal // the graceful shutdown Stop sends
	grace      time.Duration  // how long a stop waits before SIGKILL
	// signalLeader sends stopSignal to the main process alone, for a
	// server that shuts its children down itself; otherwise the whole
	// process group gets it.
	signalLeader bool
	// stopped, when set, runs after each stop: a helper process the
	// server needs while it runs (RabbitMQ's epmd) stops with it.
	stopped func()

	// private is set for a server started for one test: its databases go
	// away with it, so they are not dropped one by one.
	private bool

	mu   sync.Mutex
	proc *process
	seq  int // databases handed out, for unique names
}

// base gives the generic helpers below the procServer of a server.
func (s *procServer) base() *procServer { return s }

func (s *procServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && s.proc.running() {
		return nil
	}
	path, args, err := s.command()
	if err != nil {
		return err
	}
	p, err := startProcess(filepath.Join(s.dir, s.logName), s.cred, path, args...)
	if err != nil {
		return err
	}
	s.proc = p
	return p.waitReady(s.readyTimeout, s.ready)
}

// startOnFreePorts starts the server on n free ports, handed first to
// setPorts (which records them and writes any config naming them), and
// again on new ones when another process took a port first.
func (s *procServer) startOnFreePorts(n int, setPorts func(ports []int) error) error {
	return onFreePorts(func(ports []int) error {
		if err := setPorts(ports); err != nil {
			return err
		}
		return s.start()
	}, n)
}

func (s *procServer) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && s.proc.running()
}

// stop sends sig and waits up to grace for the server to exit, then
// SIGKILLs its process group.
func (s *procServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	if s.stopped != nil {
		defer s.stopped()
	}
	if !s.signalLeader {
		p.stop(sig, s.grace)
		return
	}
	if p.running() {
		p.cmd.Process.Signal(sig)
	}
	select {
	case <-p.exited:
	case <-time.After(s.grace):
		p.stop(syscall.SIGKILL, 0)
	}
}

// shutdown is the graceful stop that StopAll and a test's cleanup run.
func (s *procServer) shutdown() { s.stop(s.stopSignal) }

// Stop shuts the server down gracefully, and kills it if it takes too
// long. Start brings it back on the same port and data.
func (s *procServer) Stop(t testing.TB) {
	t.Helper()
	s.stop(s.stopSignal)
}

// Kill kills the server (SIGKILL), as a crash would; the next Start
// recovers from what it had written out.
func (s *procServer) Kill(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGKILL)
}

// Start starts a stopped server again, on the same port and data, and
// waits until it answers.
func (s *procServer) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testsrv: restart %s: %v", s.name, err)
	}
}

// Restart stops the server, waits for downtime, and starts it again.
func (s *procServer) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	s.Stop(t)
	time.Sleep(downtime)
	s.Start(t)
}

// newDatabase creates a database with a name unique within the server and
// drops it when the test ends; on a private server the whole server goes
// away instead.
func (s *procServer) newDatabase(t testing.TB, create, drop func(ctx context.Context, name string) error) string {
	t.Helper()
	s.mu.Lock()
	s.seq++
	name := dbName(t, s.seq)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := create(ctx, name); err != nil {
		t.Fatalf("testsrv: create %s database %s: %v", s.name, name, err)
	}
	t.Cleanup(func() {
		if s.private {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx, name); err != nil {
			t.Logf("testsrv: drop %s database %s: %v", s.name, name, err)
		}
	})
	return name
}

// procHandle is what the helpers below need of a server: its procServer.
type procHandle interface {
	base() *procServer
}

// sharedServer is a server the test binary shares: started on first use
// in a directory of rootDir, stopped by StopAll.
type sharedServer[S procHandle] struct {
	once sync.Once
	srv  S
	err  error
}

// get returns the shared server, starting it in rootDir/subdir with start
// on first use; a server that failed to start fails every test asking for
// it.
func (sh *sharedServer[S]) get(t testing.TB, name, subdir string, start func(dir string) (S, error)) S {
	t.Helper()
	sh.once.Do(func() {
		var dir string
		if dir, sh.err = rootDir(); sh.err != nil {
			return
		}
		sh.srv, sh.err = start(filepath.Join(dir, subdir))
		if sh.err == nil {
			atExit(sh.srv.base().shutdown)
		}
	})
	if sh.err != nil {
		t.Fatalf("testsrv: start %s: %v", name, sh.err)
	}
	return sh.srv
}

// startPrivate starts a server for one test in a fresh directory; it is
// stopped and removed when the test ends.
func startPrivate[S procHandle](t testing.TB, name, prefix string, start func(dir string) (S, error)) S {
	t.Helper()
	s, err := start(privateDir(t, prefix))
	if err != nil {
		t.Fatalf("testsrv: start %s: %v", name, err)
	}
	s.base().private = true
	t.Cleanup(s.base().shutdown) // runs before privateDir's RemoveAll
	return s
}
