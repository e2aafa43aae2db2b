package testsrv_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestPostgres(t *testing.T) {
	start := time.Now()
	url := testsrv.Postgres(t)
	t.Logf("PostgreSQL ready in %s: %s", time.Since(start), url)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY, item text)`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO orders VALUES (1, 'apple'), (2, 'pear')`); err != nil {
		t.Fatal(err)
	}
	var n int
	var item string
	if err := c.QueryRow(ctx, `SELECT count(*), max(item) FROM orders`).Scan(&n, &item); err != nil {
		t.Fatal(err)
	}
	if n != 2 || item != "pear" {
		t.Fatalf("got %d rows, max %q", n, item)
	}
	var level string
	if err := c.QueryRow(ctx, `SHOW wal_level`).Scan(&level); err != nil || level != "logical" {
		t.Fatalf("wal_level = %q, %v", level, err)
	}
	// The CDC source opens a replication connection and a logical slot.
	rc, err := pgconn.Connect(ctx, url+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	sys, err := pglogrepl.IdentifySystem(ctx, rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pglogrepl.CreateReplicationSlot(ctx, rc, "t_slot", "pgoutput", pglogrepl.CreateReplicationSlotOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("replication: system %s, timeline %d, at %s", sys.SystemID, sys.Timeline, sys.XLogPos)
}

func TestPostgresRestart(t *testing.T) {
	srv := testsrv.NewPostgres(t)
	db := srv.NewDatabase(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `CREATE TABLE kv (k text PRIMARY KEY); INSERT INTO kv VALUES ('before')`); err != nil {
		t.Fatal(err)
	}
	c.Close(ctx)

	srv.Crash(t)
	if _, err := pgx.Connect(ctx, db.URL); err == nil {
		t.Fatal("connected to a stopped server")
	}
	start := time.Now()
	srv.Start(t)
	t.Logf("restart after crash took %s", time.Since(start))

	c, err = pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var k string
	if err := c.QueryRow(ctx, `SELECT k FROM kv`).Scan(&k); err != nil || k != "before" {
		t.Fatalf("after restart: %q, %v", k, err)
	}
	srv.Restart(t, 100*time.Millisecond)

	if _, err := c.Exec(ctx, `INSERT INTO kv VALUES ('before kill')`); err == nil {
		t.Fatal("the connection survived a restart")
	}
	c, err = pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, `INSERT INTO kv VALUES ('before kill')`); err != nil {
		t.Fatal(err)
	}
	srv.Kill(t)
	srv.Start(t)
	c, err = pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("after kill: %d rows, %v", n, err)
	}
}
