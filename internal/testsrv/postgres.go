package testsrv

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Database is a fresh, empty database on a test server.
type Database struct {
	Name string
	// URL is the form mqb users write: postgres://…, mysql://…,
	// clickhouse://….
	URL string
	// DSN is the form the Go driver takes: the URL for pgx,
	// user@tcp(host:port)/db for go-sql-driver/mysql, host:port for
	// clickhouse-go's Options.Addr.
	DSN string
}

// PGServer is a PostgreSQL server from the Debian postgresql package, run
// by hand on 127.0.0.1 with wal_level=logical so CDC tests can open
// replication slots.
type PGServer struct {
	dir     string // holds data/, sock/ and postgres.log
	port    int
	cred    *syscall.Credential
	bin     string
	private bool

	mu   sync.Mutex
	proc *process
	seq  int
}

var (
	sharedPGOnce sync.Once
	sharedPG     *PGServer
	sharedPGErr  error
)

// Postgres returns the URL of a fresh database on the PostgreSQL server the
// test binary shares, postgres://postgres@127.0.0.1:PORT/DB?sslmode=disable.
// The database is dropped when the test ends.
func Postgres(t testing.TB) string {
	t.Helper()
	return SharedPostgres(t).NewDatabase(t).URL
}

// SharedPostgres returns the PostgreSQL server the test binary shares,
// starting it on first use. Stopping it affects every test using it at the
// time: fault-injection tests that Stop it must not run in parallel with
// other PostgreSQL tests, or should use NewPostgres.
func SharedPostgres(t testing.TB) *PGServer {
	t.Helper()
	bin := pgBinDir(t)
	sharedPGOnce.Do(func() {
		var dir string
		if dir, sharedPGErr = rootDir(); sharedPGErr != nil {
			return
		}
		sharedPG, sharedPGErr = startPostgres(bin, filepath.Join(dir, "postgres"))
		if sharedPGErr == nil {
			atExit(sharedPG.shutdown)
		}
	})
	if sharedPGErr != nil {
		t.Fatalf("testsrv: start PostgreSQL: %v", sharedPGErr)
	}
	return sharedPG
}

// NewPostgres starts a PostgreSQL server for this test alone, stopped and
// removed when the test ends. (Servers are copies of one cached initdb:
// they share a system identifier.)
func NewPostgres(t testing.TB) *PGServer {
	t.Helper()
	bin := pgBinDir(t)
	dir := privateDir(t, "postgres-")
	s, err := startPostgres(bin, dir)
	if err != nil {
		t.Fatalf("testsrv: start PostgreSQL: %v", err)
	}
	s.private = true
	t.Cleanup(s.shutdown) // runs before privateDir's RemoveAll
	return s
}

// pgBinDir finds the newest /usr/lib/postgresql/*/bin holding initdb.
func pgBinDir(t testing.TB) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		unavailable(t, "postgresql", "PostgreSQL server not found: no /usr/lib/postgresql/*/bin/initdb")
	}
	sort.Slice(found, func(i, j int) bool { return pgMajor(found[i]) > pgMajor(found[j]) })
	return filepath.Dir(found[0])
}

func pgMajor(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// pgCredential is the postgres OS user when we run as root: initdb and
// postgres refuse to run as root.
func pgCredential(dirs ...string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres OS user (from the postgresql package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs {
		if err := os.Chown(d, uid, gid); err != nil {
			return nil, err
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

const pgConf = `
listen_addresses = '127.0.0.1'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
max_connections = 200
# Tests simulate process crashes, not machine crashes: skipping fsync loses
# nothing a killed server would keep, and makes commits fast. (Not
# synchronous_commit=off: that loses commits on a crash.)
fsync = off
full_page_writes = off
shared_buffers = 32MB
logging_collector = off
log_min_messages = warning
`

func startPostgres(bin, dir string) (*PGServer, error) {
	data := filepath.Join(dir, "data")
	sock := filepath.Join(dir, "sock")
	for _, d := range []string{dir, sock} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	cred, err := pgCredential(dir, sock)
	if err != nil {
		return nil, err
	}
	initdb := filepath.Join(bin, "initdb")
	key := versionKey("postgres", initdb, commandOutput(initdb, "--version"), pgConf)
	tmpl, err := templateDir(key, func(tdir string) error {
		if _, err := pgCredential(tdir); err != nil {
			return err
		}
		// initdb's default pg_hba with --auth=trust trusts local,
		// 127.0.0.1 and replication connections.
		data := filepath.Join(tdir, "data")
		if err := runCmd(cred, initdb, "-D", data, "-U", "postgres",
			"--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(pgConf)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := copyTree(filepath.Join(tmpl, "data"), data); err != nil {
		return nil, err
	}
	s := &PGServer{dir: dir, cred: cred, bin: bin}
	err = onFreePorts(func(ports []int) error {
		s.port = ports[0]
		return s.start()
	}, 1)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *PGServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && s.proc.running() {
		return nil
	}
	logPath := filepath.Join(s.dir, "postgres.log")
	p, err := startProcess(logPath, s.cred, filepath.Join(s.bin, "postgres"),
		"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-k", filepath.Join(s.dir, "sock"))
	if err != nil {
		return err
	}
	s.proc = p
	return p.waitReady(30*time.Second, func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, s.url("postgres"))
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.Ping(ctx)
	})
}

// Port is the server's TCP port on 127.0.0.1; it stays the same across
// Stop and Start.
func (s *PGServer) Port() int { return s.port }

// Addr is 127.0.0.1:PORT.
func (s *PGServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// DataDir is the server's data directory.
func (s *PGServer) DataDir() string { return filepath.Join(s.dir, "data") }

func (s *PGServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// NewDatabase creates an empty database, dropped (with any replication
// slot on it) when the test ends.
func (s *PGServer) NewDatabase(t testing.TB) Database {
	t.Helper()
	s.mu.Lock()
	s.seq++
	name := dbName(t, s.seq)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.exec(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("testsrv: create PostgreSQL database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if s.private {
			return // the whole server goes away
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Slots would block the drop and use up max_replication_slots.
		s.exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = '`+name+`' AND active_pid IS NOT NULL`)
		s.exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '`+name+`'`)
		if err := s.exec(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Logf("testsrv: drop PostgreSQL database %s: %v", name, err)
		}
	})
	return Database{Name: name, URL: s.url(name), DSN: s.url(name)}
}

func (s *PGServer) exec(ctx context.Context, sql string) error {
	c, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// Stop shuts the server down (fast shutdown: clients are disconnected,
// nothing committed is lost). Start brings it back on the same port and
// data directory.
func (s *PGServer) Stop(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGINT)
}

// Crash stops the server the way a crash would (immediate shutdown, no
// checkpoint); the next Start runs crash recovery.
func (s *PGServer) Crash(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGQUIT)
}

// Kill SIGKILLs the server and all its backends at once, as an OOM kill or
// a machine losing power would (minus the page cache); the next Start runs
// crash recovery.
func (s *PGServer) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil && p.running() {
		// Backends call setsid, so they are not in our process group: kill
		// them by parentage. A backend left alive would keep the shared
		// memory attached and the next postmaster would refuse to start.
		children := childPIDs(p.cmd.Process.Pid)
		p.cmd.Process.Kill()
		for _, c := range children {
			syscall.Kill(c, syscall.SIGKILL)
		}
		<-p.exited
		waitGone(children, 10*time.Second)
	}
}

// Start starts a stopped server again, on the same port and data
// directory, and waits until it accepts connections.
func (s *PGServer) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testsrv: restart PostgreSQL: %v", err)
	}
}

// Restart stops the server, waits for downtime, and starts it again.
func (s *PGServer) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	s.Stop(t)
	time.Sleep(downtime)
	s.Start(t)
}

func (s *PGServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		// Signal the postmaster only: it shuts its children down itself.
		if p.running() {
			p.cmd.Process.Signal(sig)
		}
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			p.stop(syscall.SIGKILL, 0)
		}
	}
}

func (s *PGServer) shutdown() {
	s.stop(syscall.SIGINT)
}
