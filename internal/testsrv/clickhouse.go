package testsrv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ClickHouse on this machine is Debian's clickhouse-server 18.16 (2018):
// native protocol revision 54412. What we met using it with
// github.com/ClickHouse/clickhouse-go/v2 (v2.51) over the native protocol:
//
//   - Set DialTimeout and ReadTimeout on every connection. A request the
//     old server does not understand is never answered, and without a read
//     timeout the client waits forever.
//   - Insert with PrepareBatch and an explicit column list,
//     "INSERT INTO t (a, b)", or with INSERT … SELECT. Without the column
//     list the batch has no columns ("expected 0 arguments"); Exec of
//     "INSERT … VALUES (…)", with literals or with bound arguments, hangs
//     until the read timeout.
//   - SELECT with positional (?) and named (@name) parameters works;
//     settings and query ids in the context work.
//   - Not in 18.16: the DateTime64, Bool and Map types (use DateTime, UInt8,
//     Array/Nested); async inserts (async_insert); TTL clauses; CREATE
//     USER (users come from users.xml: here only "default", no password,
//     from 127.0.0.1). LowCardinality needs the setting
//     allow_experimental_low_cardinality_type=1.
//   - Working: MergeTree and ReplacingMergeTree with ORDER BY, Memory,
//     Nullable, Array, UUID, Date, DateTime, Decimal, CREATE … IF NOT
//     EXISTS, ALTER … DELETE/UPDATE mutations.
//   - Open connections (native or HTTP keep-alive) hold up a graceful
//     shutdown by 10 s or more; Stop kills the server after 3 s. Close
//     clients before Stop for a clean shutdown.

// ClickHouseServer is a ClickHouse server from the Debian clickhouse-server
// package, run by hand on 127.0.0.1 with its own config in a temp dir.
//
// Stop shuts the server down (SIGTERM, SIGKILL after 3 s), Kill kills it
// (SIGKILL) as a crash would; Start brings it back on the same ports and
// data.
type ClickHouseServer struct {
	procServer
	tcpPort  int
	httpPort int
}

const clickhouseServerPath = "/usr/sbin/clickhouse-server"

var sharedCH sharedServer[*ClickHouseServer]

// ClickHouse returns the native-protocol address, 127.0.0.1:PORT, of the
// ClickHouse server the test binary shares, starting it on first use. Log
// in as user "default" with no password. Use SharedClickHouse(t).
// NewDatabase(t) for a fresh database.
func ClickHouse(t testing.TB) (nativeAddr string) {
	t.Helper()
	return SharedClickHouse(t).NativeAddr()
}

// SharedClickHouse returns the ClickHouse server the test binary shares.
func SharedClickHouse(t testing.TB) *ClickHouseServer {
	t.Helper()
	checkClickHouse(t)
	return sharedCH.get(t, "ClickHouse", "clickhouse", startClickHouse)
}

// NewClickHouse starts a ClickHouse server for this test alone, stopped
// and removed when the test ends.
func NewClickHouse(t testing.TB) *ClickHouseServer {
	t.Helper()
	checkClickHouse(t)
	return startPrivate(t, "ClickHouse", "clickhouse-", startClickHouse)
}

func checkClickHouse(t testing.TB) {
	t.Helper()
	if hidden("clickhouse") {
		unavailable(t, "clickhouse-server", "ClickHouse server hidden by %s", HideEnv)
	}
	if _, err := os.Stat(clickhouseServerPath); err != nil {
		unavailable(t, "clickhouse-server", "ClickHouse server not found: no %s", clickhouseServerPath)
	}
}

// Only the native and HTTP ports: no interserver, MySQL or TLS ports.
const clickhouseConfig = `<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <console>1</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>{{tcp}}</tcp_port>
    <http_port>{{http}}</http_port>
    <path>{{dir}}/data/</path>
    <tmp_path>{{dir}}/data/tmp/</tmp_path>
    <user_files_path>{{dir}}/data/user_files/</user_files_path>
    <format_schema_path>{{dir}}/data/format_schemas/</format_schema_path>
    <users_config>{{dir}}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mlock_executable>false</mlock_executable>
</yandex>
`

const clickhouseUsers = `<?xml version="1.0"?>
<yandex>
    <profiles><default></default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default></default></quotas>
</yandex>
`

func startClickHouse(dir string) (*ClickHouseServer, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(clickhouseUsers), 0o644); err != nil {
		return nil, err
	}
	s := &ClickHouseServer{}
	s.procServer = procServer{
		name: "ClickHouse", dir: dir, logName: "clickhouse-server.log",
		command: func() (string, []string, error) {
			return clickhouseServerPath, []string{"--config-file=" + filepath.Join(dir, "config.xml")}, nil
		},
		ready: func(ctx context.Context) error {
			_, err := s.query(ctx, "SELECT 1")
			return err
		},
		readyTimeout: 60 * time.Second,
		stopSignal:   syscall.SIGTERM,
		// Open client connections hold up 18.16's shutdown for 10 s or
		// more; inserted parts are on disk already, so a kill loses nothing.
		grace: 3 * time.Second,
	}
	err := s.startOnFreePorts(2, func(ports []int) error {
		s.tcpPort, s.httpPort = ports[0], ports[1]
		conf := strings.NewReplacer("{{tcp}}", strconv.Itoa(s.tcpPort), "{{http}}", strconv.Itoa(s.httpPort), "{{dir}}", dir).Replace(clickhouseConfig)
		return os.WriteFile(filepath.Join(dir, "config.xml"), []byte(conf), 0o644)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Idle keep-alive connections hold up the old server's shutdown.
var clickhouseHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// query runs a statement over the HTTP interface, which needs no driver.
func (s *ClickHouseServer) query(ctx context.Context, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.HTTPAddr()+"/", strings.NewReader(q))
	if err != nil {
		return "", err
	}
	resp, err := clickhouseHTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("clickhouse: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// NativeAddr is 127.0.0.1:PORT of the native protocol (clickhouse-go's
// Options.Addr).
func (s *ClickHouseServer) NativeAddr() string { return fmt.Sprintf("127.0.0.1:%d", s.tcpPort) }

// HTTPAddr is 127.0.0.1:PORT of the HTTP interface.
func (s *ClickHouseServer) HTTPAddr() string { return fmt.Sprintf("127.0.0.1:%d", s.httpPort) }

// Version is the server's version, e.g. 18.16.1.
func (s *ClickHouseServer) Version(t testing.TB) string {
	t.Helper()
	v, err := s.query(context.Background(), "SELECT version()")
	if err != nil {
		t.Fatalf("testsrv: ClickHouse version: %v", err)
	}
	return strings.TrimSpace(v)
}

// NewDatabase creates an empty database, dropped when the test ends. Its
// URL is clickhouse://default@127.0.0.1:PORT/DB (native protocol) and its
// DSN the native address.
func (s *ClickHouseServer) NewDatabase(t testing.TB) Database {
	t.Helper()
	name := s.newDatabase(t, func(ctx context.Context, name string) error {
		_, err := s.query(ctx, "CREATE DATABASE "+name)
		return err
	}, func(ctx context.Context, name string) error {
		if !s.running() {
			return nil // a test stopped it
		}
		_, err := s.query(ctx, "DROP DATABASE IF EXISTS "+name)
		return err
	})
	return Database{
		Name: name,
		URL:  (&url.URL{Scheme: "clickhouse", User: url.User("default"), Host: s.NativeAddr(), Path: "/" + name}).String(),
		DSN:  s.NativeAddr(),
	}
}
