package testsrv

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
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
//
// Stop is a fast shutdown (clients are disconnected, nothing committed is
// lost), Crash an immediate one, Kill a SIGKILL of every process; Start
// brings the server back on the same port and data directory, running
// crash recovery after Crash or Kill.
type PGServer struct {
	procServer // dir holds data/, sock/ and postgres.log
	port       int
	bin        string
}

var sharedPG sharedServer[*PGServer]

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
	return sharedPG.get(t, "PostgreSQL", "postgres", func(dir string) (*PGServer, error) {
		return startPostgres(bin, dir)
	})
}

// NewPostgres starts a PostgreSQL server for this test alone, stopped and
// removed when the test ends. (Servers are copies of one cached initdb:
// they share a system identifier.)
func NewPostgres(t testing.TB) *PGServer {
	t.Helper()
	bin := pgBinDir(t)
	return startPrivate(t, "PostgreSQL", "postgres-", func(dir string) (*PGServer, error) {
		return startPostgres(bin, dir)
	})
}

// pgBinDir finds the newest /usr/lib/postgresql/*/bin holding initdb.
func pgBinDir(t testing.TB) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if hidden("postgres") {
		found = nil
	}
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
	s := &PGServer{bin: bin}
	s.procServer = procServer{
		name: "PostgreSQL", dir: dir, logName: "postgres.log", cred: cred,
		command: func() (string, []string, error) {
			return filepath.Join(s.bin, "postgres"), []string{
				"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
				"-k", filepath.Join(s.dir, "sock")}, nil
		},
		ready: func(ctx context.Context) error {
			c, err := pgx.Connect(ctx, s.url("postgres"))
			if err != nil {
				return err
			}
			defer c.Close(ctx)
			return c.Ping(ctx)
		},
		readyTimeout: 30 * time.Second,
		stopSignal:   syscall.SIGINT, // fast shutdown
		grace:        15 * time.Second,
		// The postmaster shuts its children down itself.
		signalLeader: true,
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
	name := s.newDatabase(t, func(ctx context.Context, name string) error {
		return s.exec(ctx, `CREATE DATABASE "`+name+`"`)
	}, func(ctx context.Context, name string) error {
		// Slots would block the drop and use up max_replication_slots.
		s.exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = '`+name+`' AND active_pid IS NOT NULL`)
		s.exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '`+name+`'`)
		return s.exec(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
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
