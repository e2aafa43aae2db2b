package testsrv_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestMariaDB(t *testing.T) {
	start := time.Now()
	db := testsrv.MariaDBDatabase(t)
	t.Logf("MariaDB ready in %s: %s %s", time.Since(start), db.DSN, db.URL)
	if !strings.HasPrefix(db.DSN, "root@tcp(127.0.0.1:") || !strings.HasPrefix(db.URL, "mysql://root@127.0.0.1:") {
		t.Fatalf("unexpected forms %q %q", db.DSN, db.URL)
	}
	conn, err := sql.Open("mysql", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		`CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(20))`,
		`INSERT INTO orders VALUES (1, 'apple'), (2, 'pear')`,
	} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var item string
	if err := conn.QueryRow(`SELECT count(*), max(item) FROM orders`).Scan(&n, &item); err != nil || n != 2 || item != "pear" {
		t.Fatalf("got %d, %q, %v", n, item, err)
	}
	var name, format string
	if err := conn.QueryRow(`SHOW VARIABLES LIKE 'binlog_format'`).Scan(&name, &format); err != nil || format != "ROW" {
		t.Fatalf("binlog_format = %q, %v", format, err)
	}
	// Temporary tables and sort files go to a directory of the server's
	// own, beside its data, where no other test's clean-up reaches them.
	var tmpdir string
	if err := conn.QueryRow(`SELECT @@tmpdir`).Scan(&tmpdir); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(filepath.Dir(testsrv.SharedMariaDB(t).DataDir()), "tmp")
	if tmpdir != want {
		t.Errorf("tmpdir %s, want %s", tmpdir, want)
	}
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Errorf("tmpdir %s: %v", want, err)
	}
}

func TestMariaDBRestart(t *testing.T) {
	srv := testsrv.NewMariaDB(t)
	db := srv.NewDatabase(t)
	conn, err := sql.Open("mysql", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(`CREATE TABLE kv (k VARCHAR(20) PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`INSERT INTO kv VALUES ('before')`); err != nil {
		t.Fatal(err)
	}
	srv.Kill(t)
	if err := conn.Ping(); err == nil {
		t.Fatal("pinged a killed server")
	}
	start := time.Now()
	srv.Start(t)
	t.Logf("restart after crash took %s", time.Since(start))
	var k string
	if err := conn.QueryRow(`SELECT k FROM kv`).Scan(&k); err != nil || k != "before" {
		t.Fatalf("after restart: %q, %v", k, err)
	}
	start = time.Now()
	srv.Stop(t)
	t.Logf("clean stop took %s", time.Since(start))
	start = time.Now()
	srv.Start(t)
	t.Logf("start took %s", time.Since(start))
	if err := conn.Ping(); err != nil {
		t.Fatal(err)
	}
}
