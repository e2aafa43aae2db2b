package sql

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// showPG runs SHOW name on a connection made from cfg.
func showPG(t *testing.T, cfg *pgconn.Config, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, "SHOW "+name).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return string(res[0].Rows[0][0])
}

// TestPostgresCommitsWaitForDisk: on a database whose default is
// synchronous_commit = off (set for speed, so that the server answers a
// commit before its WAL is on disk and a crash of it loses the commit),
// the sink's sessions and the stores' (dedup, checkpoint) run with it on.
// The sink warns at start-up about what only the server's configuration
// decides: the test server runs with fsync = off.
func TestPostgresCommitsWaitForDisk(t *testing.T) {
	db := testsrv.SharedPostgres(t).NewDatabase(t)
	admin, err := pgconn.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q SET synchronous_commit = off`, db.Name)).ReadAll(); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if got := showPG(t, admin, "synchronous_commit"); got != "off" {
		t.Fatalf("a plain session has synchronous_commit %s, want the database's off", got)
	}
	cfg, err := pgConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := showPG(t, cfg, "synchronous_commit"); got != "on" {
		t.Errorf("the sink's session has synchronous_commit %s, want on", got)
	}
	// A level that also flushes, which the url asks for, is kept.
	local, err := pgConfig(db.URL + "&options=-c%20synchronous_commit%3Dlocal")
	if err != nil {
		t.Fatal(err)
	}
	if got := showPG(t, local, "synchronous_commit"); got != "local" {
		t.Errorf("a session whose url asks for local has synchronous_commit %s", got)
	}
	kv, err := sqlkv.Open(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	var got string
	err = kv.Tx(ctx, func(q sqlkv.Querier) error {
		return q.Query(ctx, "SHOW synchronous_commit", func(scan func(dest ...any) error) error { return scan(&got) })
	})
	if err != nil || got != "on" {
		t.Errorf("a store's session has synchronous_commit %q (%v), want on", got, err)
	}

	logs := runServerSink(t, db.URL)
	if !strings.Contains(logs, "fsync = off") {
		t.Errorf("no warning about the server's fsync = off:\n%s", logs)
	}
}

// TestMariaDBWarnsOnLazyLogFlush: the test server runs with
// innodb_flush_log_at_trx_commit = 2; the sink says so at start-up.
func TestMariaDBWarnsOnLazyLogFlush(t *testing.T) {
	logs := runServerSink(t, testsrv.MariaDBDatabase(t).URL)
	if !strings.Contains(logs, "innodb_flush_log_at_trx_commit = 2") {
		t.Errorf("no warning about innodb_flush_log_at_trx_commit:\n%s", logs)
	}
}

// runServerSink runs a file of two orders into a table at url and
// returns the warnings it logged.
func runServerSink(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte("{\"id\":1}\n{\"id\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO durable_t (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING"
	if strings.HasPrefix(url, "mysql") {
		insert = "INSERT IGNORE INTO durable_t (id) VALUES (${payload.id})"
	}
	p := plantest.Compile(t, fmt.Sprintf(`route r {
  from file { path = %q, checkpoint_store = "pebble://%s" }
  to sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS durable_t (id BIGINT PRIMARY KEY)"
    insert_query = %q
  }
}`, in, filepath.Join(dir, "state"), url, insert))
	var logs runtest.Logs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := runtime.Run(ctx, p, logs.Options()); err != nil {
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	return logs.String()
}
