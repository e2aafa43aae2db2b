package testsrv_test

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestClickHouse(t *testing.T) {
	start := time.Now()
	srv := testsrv.SharedClickHouse(t)
	db := srv.NewDatabase(t)
	t.Logf("ClickHouse %s ready in %s: %s %s", srv.Version(t), time.Since(start), srv.NativeAddr(), db.URL)

	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{srv.NativeAddr()},
		Auth:        clickhouse.Auth{Database: db.Name, Username: "default"},
		DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, `CREATE TABLE orders (id UInt64, item String, at DateTime) ENGINE = MergeTree ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, `INSERT INTO orders (id, item, at)`)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	for i, item := range []string{"apple", "pear"} {
		if err := batch.Append(uint64(i+1), item, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	var n uint64
	var item string
	if err := conn.QueryRow(ctx, `SELECT count(), max(item) FROM orders`).Scan(&n, &item); err != nil {
		t.Fatal(err)
	}
	if n != 2 || item != "pear" {
		t.Fatalf("got %d rows, max %q", n, item)
	}
}

func TestClickHouseRestart(t *testing.T) {
	srv := testsrv.NewClickHouse(t)
	db := srv.NewDatabase(t)
	open := func() clickhouse.Conn {
		conn, err := clickhouse.Open(&clickhouse.Options{
			Addr:        []string{srv.NativeAddr()},
			Auth:        clickhouse.Auth{Database: db.Name, Username: "default"},
			DialTimeout: 5 * time.Second,
			ReadTimeout: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := open()
	if err := conn.Exec(ctx, `CREATE TABLE kv (k String) ENGINE = MergeTree ORDER BY k`); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, `INSERT INTO kv (k) SELECT 'before'`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	srv.Kill(t)
	start := time.Now()
	srv.Start(t)
	t.Logf("restart after crash took %s", time.Since(start))
	conn = open()
	defer conn.Close()
	var k string
	if err := conn.QueryRow(ctx, `SELECT k FROM kv`).Scan(&k); err != nil || k != "before" {
		t.Fatalf("after restart: %q, %v", k, err)
	}
}
