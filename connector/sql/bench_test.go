package sql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

const benchSQLRows = 200000

var benchInput = plantest.BenchInput

var benchRun = runtest.Bench

// benchPostgres is a fresh database with an empty orders table, truncated
// before each iteration by reset.
func benchPostgres(b *testing.B) (url string, reset func()) {
	url = testsrv.Postgres(b)
	exec := func(q string) {
		if err := pgExec(url, q); err != nil {
			b.Fatal(err)
		}
	}
	exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, amount BIGINT NOT NULL, body TEXT)`)
	return url, func() { exec(`TRUNCATE orders`) }
}

func pgExec(url, q string) error {
	cfg, err := pgConfig(url)
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, q).ReadAll()
	return err
}

// benchSQLPlan is file → id → sql on url with the given insert tail.
func benchSQLPlan(input, state, url, tail string, bulk bool) plan.Plan {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(input), "mode": enumV("consume"), "checkpoint_store": strV("pebble://" + state)}},
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		{ID: "n2", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url": strV(url), "bulk_copy": {Type: plan.TBool, Bool: bulk},
			"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
				ex("payload.amount"), lit(", "), ex("payload.body"), lit(")"+tail))}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "load", Guarantee: plan.AtLeastOnce,
		Concurrency: 2, BatchSize: 1024, Nodes: nodes, Edges: chain(nodes)}}}
}

func benchSQLLoad(b *testing.B, tail string, bulk bool) {
	url, reset := benchPostgres(b)
	input, size := benchInput(b, benchSQLRows)
	benchRun(b, benchSQLRows, size, func(i int, state string) plan.Plan {
		reset()
		return benchSQLPlan(input, state, url, tail, bulk)
	})
}

// BenchmarkPostgresSink: file → PostgreSQL, 200k rows per run:
//
//	upsert: INSERT … ON CONFLICT (id) DO NOTHING (pipelined batches)
//	copy:   bulk_copy = true (COPY FROM STDIN per batch)
//	psql_copy: `psql \copy` of the same rows from CSV, for comparison
//
// lookPsql finds psql on the PATH or in the PostgreSQL install; a
// benchmark without it is skipped.
func lookPsql(b *testing.B) string {
	b.Helper()
	if psql, err := exec.LookPath("psql"); err == nil {
		return psql
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	if len(matches) == 0 {
		b.Skip("psql not installed")
	}
	return matches[0]
}

func BenchmarkPostgresSink(b *testing.B) {
	b.Run("upsert", func(b *testing.B) { benchSQLLoad(b, " ON CONFLICT (id) DO NOTHING", false) })
	b.Run("copy", func(b *testing.B) { benchSQLLoad(b, "", true) })
	b.Run("psql_copy", func(b *testing.B) {
		psql := lookPsql(b)
		url, reset := benchPostgres(b)
		csv := filepath.Join(b.TempDir(), "orders.csv")
		var sb strings.Builder
		for i := range benchSQLRows {
			fmt.Fprintf(&sb, "o-%d,%d,order number %d with some padding text\n", i, i, i)
		}
		if err := os.WriteFile(csv, []byte(sb.String()), 0o644); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(sb.Len()))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			reset()
			b.StartTimer()
			out, err := exec.Command(psql, url, "-v", "ON_ERROR_STOP=1", "-c",
				`\copy orders (id, amount, body) FROM '`+csv+`' WITH (FORMAT csv)`).CombinedOutput()
			if err != nil {
				b.Fatalf("psql: %v\n%s", err, out)
			}
		}
		b.ReportMetric(float64(benchSQLRows)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkPostgresCursorToFile: a 200k-row table → sql cursor source →
// JSON-lines file, against `psql \copy (SELECT to_jsonb(t) …) TO` of the
// same rows.
func BenchmarkPostgresCursorToFile(b *testing.B) {
	url := testsrv.Postgres(b)
	for _, q := range []string{
		`CREATE TABLE src (id BIGINT PRIMARY KEY, amount BIGINT NOT NULL, body TEXT)`,
		fmt.Sprintf(`INSERT INTO src SELECT i, i, 'order number ' || i || ' with some padding text' FROM generate_series(1, %d) i`, benchSQLRows),
	} {
		if err := pgExec(url, q); err != nil {
			b.Fatal(err)
		}
	}
	run := func(out string, until func(size int64) bool) {
		nodes := []plan.Node{
			{ID: "n0", Role: plan.RoleSource, Kind: "sql", Attrs: map[string]plan.Value{
				"url": strV(url), "table": strV("src"), "cursor_column": strV("id"),
				"checkpoint_store": strV("pebble://" + filepath.Join(filepath.Dir(out), "state")),
				"poll_interval":    {Type: plan.TDuration, Str: "20ms", Int: int64(20e6)}}},
			{ID: "n1", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{"path": strV(out)}},
		}
		p := plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "dump", Guarantee: plan.AtLeastOnce,
			Concurrency: 1, BatchSize: 4096, Nodes: nodes, Edges: chain(nodes)}}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := runtime.Run(ctx, p, runtime.Options{Logger: slog.New(slog.DiscardHandler)})
			done <- err
		}()
		for {
			fi, err := os.Stat(out)
			if err == nil && until(fi.Size()) {
				break
			}
			select {
			case err := <-done:
				b.Fatalf("run ended early: %v", err)
			default:
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.Run("mqb", func(b *testing.B) {
		// A first, untimed run learns the output's size.
		warm := filepath.Join(b.TempDir(), "out.jsonl")
		var last int64
		stable := 0
		run(warm, func(size int64) bool {
			if size == last && size > 0 {
				stable++
			} else {
				stable, last = 0, size
			}
			return stable > 100
		})
		b.SetBytes(last)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			out := filepath.Join(b.TempDir(), "out.jsonl")
			run(out, func(size int64) bool { return size >= last })
		}
		b.ReportMetric(float64(benchSQLRows)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("psql_copy", func(b *testing.B) {
		psql := lookPsql(b)
		for i := 0; i < b.N; i++ {
			out := filepath.Join(b.TempDir(), "out.jsonl")
			o, err := exec.Command(psql, url, "-v", "ON_ERROR_STOP=1", "-c",
				`\copy (SELECT to_jsonb(t) FROM src t ORDER BY id) TO '`+out+`'`).CombinedOutput()
			if err != nil {
				b.Fatalf("psql: %v\n%s", err, o)
			}
		}
		b.ReportMetric(float64(benchSQLRows)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// BenchmarkMariaDBSink: file → MariaDB with ON DUPLICATE KEY UPDATE, 200k
// rows per run (one statement per row, interpolated, in one transaction
// per batch).
func BenchmarkMariaDBSink(b *testing.B) {
	d := testsrv.MariaDBDatabase(b)
	exec := func(q string) {
		db, err := sql.Open("mysql", d.DSN)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	exec(`CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, amount BIGINT NOT NULL, body TEXT)`)
	input, size := benchInput(b, benchSQLRows)
	benchRun(b, benchSQLRows, size, func(i int, state string) plan.Plan {
		exec(`TRUNCATE orders`)
		return benchSQLPlan(input, state, d.URL, " ON DUPLICATE KEY UPDATE id = id", false)
	})
}
