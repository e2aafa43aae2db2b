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
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBServer is a MariaDB server from the Debian mariadb-server package,
// run by hand on 127.0.0.1 with the binary log on in ROW format (what a
// binlog CDC reader needs). User root has no password.
//
// Stop shuts the server down cleanly (SIGTERM), Kill kills it (SIGKILL) as
// a crash would; Start brings it back on the same port and data directory,
// running InnoDB crash recovery after a Kill.
type MariaDBServer struct {
	procServer // dir holds data/, tmp/, mariadbd.sock and mariadbd.log
	port       int
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

var sharedMariaDB sharedServer[*MariaDBServer]

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
	return sharedMariaDB.get(t, "MariaDB", "mariadb", startMariaDB)
}

// NewMariaDB starts a MariaDB server for this test alone, stopped and
// removed when the test ends.
func NewMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	checkMariaDB(t)
	return startPrivate(t, "MariaDB", "mariadb-", startMariaDB)
}

func checkMariaDB(t testing.TB) {
	t.Helper()
	if hidden("mariadb") {
		unavailable(t, "mariadb-server", "MariaDB server hidden by %s", HideEnv)
	}
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
	s := &MariaDBServer{}
	s.procServer = procServer{
		name: "MariaDB", dir: dir, logName: "mariadbd.log",
		command: func() (string, []string, error) {
			// Its own temporary directory: in the shared one (TMPDIR or
			// /tmp) another test's clean-up deleted a temporary table
			// from under a running statement. Not in data/, where a
			// directory is a database.
			if err := os.MkdirAll(s.tmpDir(), 0o755); err != nil {
				return "", nil, err
			}
			return mariadbdPath, s.args(), nil
		},
		ready: func(ctx context.Context) error {
			db, err := sql.Open("mysql", s.dsn(""))
			if err != nil {
				return err
			}
			defer db.Close()
			return db.PingContext(ctx)
		},
		readyTimeout: 60 * time.Second,
		stopSignal:   syscall.SIGTERM,
		grace:        30 * time.Second,
	}
	err = s.startOnFreePorts(1, func(ports []int) error {
		s.port = ports[0]
		return nil
	})
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

// args is mariadbd's command line.
func (s *MariaDBServer) args() []string {
	data := filepath.Join(s.dir, "data")
	return append([]string{"--no-defaults", "--user=" + currentUser(),
		"--datadir=" + data,
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(s.port),
		"--socket=" + filepath.Join(s.dir, "mariadbd.sock"),
		"--tmpdir=" + s.tmpDir(),
		"--pid-file=" + filepath.Join(s.dir, "mariadbd.pid"),
		"--skip-name-resolve",
		"--log-bin=" + filepath.Join(data, "binlog"), "--binlog-format=ROW",
		"--binlog-row-image=FULL", "--server-id=1",
		"--max-connections=500",
	}, mariadbFastFlags...)
}

// tmpDir is the server's temporary directory (temporary tables, sort
// files), its own.
func (s *MariaDBServer) tmpDir() string { return filepath.Join(s.dir, "tmp") }

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
	name := s.newDatabase(t, func(ctx context.Context, name string) error {
		return s.exec(ctx, "CREATE DATABASE `"+name+"`")
	}, func(ctx context.Context, name string) error {
		return s.exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
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
