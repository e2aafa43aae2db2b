package testsrv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisServer is a Redis server from the Debian redis-server package,
// private to one test, on 127.0.0.1. It keeps an append-only file synced
// on every write (appendfsync always), so Stop and Start, and Kill and
// Start, keep the port and every write the server acknowledged: streams,
// consumer groups and their pending entries.
type RedisServer struct {
	procServer // dir holds redis.conf, data/ and redis.log
	port       int
}

// Redis starts a Redis server for this test and returns its URL,
// redis://127.0.0.1:PORT. It is stopped and removed when the test ends.
func Redis(t testing.TB) string {
	t.Helper()
	return NewRedis(t).URL()
}

// NewRedis is Redis returning a handle that can stop, kill and restart
// the server.
func NewRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin := redisBinary(t)
	return startPrivate(t, "Redis", "redis-", func(dir string) (*RedisServer, error) {
		return startRedis(bin, dir)
	})
}

// redisBinary finds redis-server.
func redisBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		bin, err = "/usr/bin/redis-server", nil
		if _, serr := os.Stat(bin); serr != nil {
			err = serr
		}
	}
	if err != nil || hidden("redis") {
		unavailable(t, "redis-server", "Redis server not found: no redis-server on PATH or in /usr/bin")
	}
	return bin
}

// redisConf is the server's configuration; the port is added per start.
// The process keeps its command line (set-proc-title no), which names
// the config file under the test binary's directory: the orphan check in
// .ci/extra.d finds a server that outlived its test binary by it.
const redisConf = `bind 127.0.0.1
protected-mode yes
daemonize no
set-proc-title no
appendonly yes
appendfsync always
save ""
logfile ""
loglevel warning
`

func startRedis(bin, dir string) (*RedisServer, error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	s := &RedisServer{}
	conf := filepath.Join(dir, "redis.conf")
	s.procServer = procServer{
		name: "Redis", dir: dir, logName: "redis.log",
		command: func() (string, []string, error) {
			return bin, []string{conf}, nil
		},
		ready: func(ctx context.Context) error {
			c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), DisableIdentity: true, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err() // LOADING while it reads its append-only file
		},
		readyTimeout: 30 * time.Second,
		stopSignal:   syscall.SIGTERM, // syncs and exits
		grace:        15 * time.Second,
	}
	err := s.startOnFreePorts(1, func(ports []int) error {
		s.port = ports[0]
		cfg := redisConf + fmt.Sprintf("port %d\ndir %s\n", s.port, data)
		return os.WriteFile(conf, []byte(cfg), 0o644)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Port is the server's TCP port on 127.0.0.1; it stays the same across
// Stop and Start.
func (s *RedisServer) Port() int { return s.port }

// Addr is 127.0.0.1:PORT.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is redis://127.0.0.1:PORT.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() }

// Client is a client of the server, closed when the test ends.
func (s *RedisServer) Client(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}
