package testsrv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBServer is a MariaDB server from the Debian mariadb-server package,
// run by hand on 127.0.0.1 with the binary log on in ROW format (what a
// binlog CDC reader needs). User root has no password.
type MariaDBServer struct {
	dir     string // holds data/, mariadbd.sock and mariadbd.log
	port    int
	private bool

	mu   sync.Mutex
	proc *process
	seq  int
}

const mariadbdPath = "/usr/sbin/mariadbd"

// Speed over durability across machine crashes; a killed server still
// keeps every commit (the log reaches the OS at each commit).
var mariadbFastFlags = []string{
	"--innodb-flush-log-at-trx-commit=2",
	"--innodb-doublewrite=0",
	"--innodb-flush-method=nosync",
	"--innodb-buffer-pool-size=32M",
	"--innodb-log-file-size=16M",
	"--innodb-buffer-pool-dump-at-shutdown=0",
	"--innodb-buffer-pool-load-at-startup=0",
}

var (
	sharedMariaDBOnce sync.Once
	sharedMariaDB     *MariaDBServer
	sharedMariaDBErr  error
)

// MariaDB returns a go-sql-driver/mysql DSN, root@tcp(127.0.0.1:PORT)/DB,
// for a fresh database on the MariaDB server the test binary shares. The
// database is dropped when the test ends. MariaDBDatabase gives the
// mysql://root@127.0.0.1:PORT/DB URL form as well.
func MariaDB(t testing.TB) string {
	t.Helper()
	return SharedMariaDB(t).NewDatabase(t).DSN
}

// MariaDBDatabase is MariaDB returning both the DSN and the URL.
func MariaDBDatabase(t testing.TB) Database {
	t.Helper()
	return SharedMariaDB(t).NewDatabase(t)
}

// SharedMariaDB returns the MariaDB server the test binary shares, starting
// it on first use. Tests that Stop it must not run in parallel with other
// MariaDB tests, or should use NewMariaDB.
func SharedMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	checkMariaDB(t)
	sharedMariaDBOnce.Do(func() {
		var dir string
		if dir, sharedMariaDBErr = rootDir(); sharedMariaDBErr != nil {
			return
		}
		sharedMariaDB, sharedMariaDBErr = startMariaDB(filepath.Join(dir, "mariadb"))
		if sharedMariaDBErr == nil {
			atExit(sharedMariaDB.shutdown)
		}
	})
	if sharedMariaDBErr != nil {
		t.Fatalf("testsrv: start MariaDB: %v", sharedMariaDBErr)
	}
	return sharedMariaDB
}

// NewMariaDB starts a MariaDB server for this test alone, stopped and
// removed when the test ends.
func NewMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	checkMariaDB(t)
	s, err := startMariaDB(privateDir(t, "mariadb-"))
	if err != nil {
		t.Fatalf("testsrv: start MariaDB: %v", err)
	}
	s.private = true
	t.Cleanup(s.shutdown)
	return s
}

func checkMariaDB(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(mariadbdPath); err != nil {
		unavailable(t, "mariadb-server", "MariaDB server not found: no %s", mariadbdPath)
	}
	if _, err := exec.LookPath("mariadb-install-db"); err != nil {
		unavailable(t, "mariadb-server", "MariaDB server not found: no mariadb-install-db")
	}
}

func startMariaDB(dir string) (*MariaDBServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key := versionKey("mariadb", commandOutput(mariadbdPath, "--version"), strings.Join(mariadbFastFlags, " "))
	tmpl, err := templateDir(key, func(tdir string) error {
		// normal: root@localhost, root@127.0.0.1 and root@::1 without a
		// password (not unix_socket auth, useless over TCP).
		args := append([]string{"--no-defaults", "--user=" + currentUser(),
			"--datadir=" + filepath.Join(tdir, "data"),
			"--auth-root-authentication-method=normal",
			"--skip-test-db", "--skip-name-resolve", "--force", "--skip-log-bin"},
			mariadbFastFlags...)
		return runCmd(nil, "mariadb-install-db", args...)
	})
	if err != nil {
		return nil, err
	}
	if err := copyTree(filepath.Join(tmpl, "data"), filepath.Join(dir, "data")); err != nil {
		return nil, err
	}
	s := &MariaDBServer{dir: dir}
	err = onFreePorts(func(ports []int) error {
		s.port = ports[0]
		return s.start()
	}, 1)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}

func (s *MariaDBServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && s.proc.running() {
		return nil
	}
	data := filepath.Join(s.dir, "data")
	args := append([]string{"--no-defaults", "--user=" + currentUser(),
		"--datadir=" + data,
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(s.port),
		"--socket=" + filepath.Join(s.dir, "mariadbd.sock"),
		"--pid-file=" + filepath.Join(s.dir, "mariadbd.pid"),
		"--skip-name-resolve",
		"--log-bin=" + filepath.Join(data, "binlog"), "--binlog-format=ROW",
		"--binlog-row-image=FULL", "--server-id=1",
		"--max-connections=500",
	}, mariadbFastFlags...)
	p, err := startProcess(filepath.Join(s.dir, "mariadbd.log"), nil, mariadbdPath, args...)
	if err != nil {
		return err
	}
	s.proc = p
	return p.waitReady(60*time.Second, func(ctx context.Context) error {
		db, err := sql.Open("mysql", s.dsn(""))
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
}

// Port is the server's TCP port on 127.0.0.1; it stays the same across
// Stop and Start.
func (s *MariaDBServer) Port() int { return s.port }

// Addr is 127.0.0.1:PORT.
func (s *MariaDBServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// DataDir is the server's data directory.
func (s *MariaDBServer) DataDir() string { return filepath.Join(s.dir, "data") }

func (s *MariaDBServer) dsn(db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = s.Addr()
	c.DBName = db
	return c.FormatDSN()
}

// NewDatabase creates an empty database, dropped when the test ends.
func (s *MariaDBServer) NewDatabase(t testing.TB) Database {
	t.Helper()
	s.mu.Lock()
	s.seq++
	name := dbName(t, s.seq)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.exec(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("testsrv: create MariaDB database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if s.private {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Logf("testsrv: drop MariaDB database %s: %v", name, err)
		}
	})
	return Database{
		Name: name,
		URL:  fmt.Sprintf("mysql://root@%s/%s", s.Addr(), name),
		DSN:  s.dsn(name),
	}
}

func (s *MariaDBServer) exec(ctx context.Context, query string) error {
	db, err := sql.Open("mysql", s.dsn(""))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, query)
	return err
}

// Stop shuts the server down cleanly (SIGTERM). Start brings it back on
// the same port and data directory.
func (s *MariaDBServer) Stop(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGTERM)
}

// Kill kills the server (SIGKILL), as a crash would; the next Start runs
// InnoDB crash recovery.
func (s *MariaDBServer) Kill(t testing.TB) {
	t.Helper()
	s.stop(syscall.SIGKILL)
}

// Start starts a stopped server again and waits until it accepts
// connections.
func (s *MariaDBServer) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testsrv: restart MariaDB: %v", err)
	}
}

// Restart stops the server, waits for downtime, and starts it again.
func (s *MariaDBServer) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	s.Stop(t)
	time.Sleep(downtime)
	s.Start(t)
}

func (s *MariaDBServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.stop(sig, 30*time.Second)
	}
}

func (s *MariaDBServer) shutdown() { s.stop(syscall.SIGTERM) }
