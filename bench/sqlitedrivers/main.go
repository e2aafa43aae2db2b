// Command sqlitedrivers times batched inserts — the SQL sink's access pattern:
// one transaction per batch, one prepared statement, ON CONFLICT DO NOTHING,
// WAL + synchronous=NORMAL — with github.com/mattn/go-sqlite3 (cgo) and
// modernc.org/sqlite (pure Go), to pick the runtime's driver.
//
//	go run ./bench/sqlitedrivers -rows 200000 -batch 1024 -runs 5
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	_ "github.com/mattn/go-sqlite3"
	_ "modernc.org/sqlite"
)

func main() {
	rows := flag.Int("rows", 200000, "rows per run")
	batch := flag.Int("batch", 1024, "rows per transaction")
	runs := flag.Int("runs", 5, "runs per driver")
	flag.Parse()
	for _, drv := range []struct{ name, dsn string }{
		{"sqlite3", "file:%s?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=5000"},
		{"sqlite", "file:%s?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)"},
	} {
		var rates []float64
		for r := 0; r < *runs; r++ {
			dir, err := os.MkdirTemp("", "sqlitebench")
			if err != nil {
				log.Fatal(err)
			}
			rate, err := run(drv.name, fmt.Sprintf(drv.dsn, filepath.Join(dir, "t.db")), *rows, *batch)
			os.RemoveAll(dir)
			if err != nil {
				log.Fatalf("%s: %v", drv.name, err)
			}
			rates = append(rates, rate)
		}
		slices.Sort(rates)
		fmt.Printf("%-8s median %8.0f rows/s  (runs %v)\n", drv.name, rates[len(rates)/2], fmtRates(rates))
	}
}

func fmtRates(rs []float64) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%.0f", r))
	}
	return out
}

func run(driver, dsn string, rows, batch int) (float64, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, amount INTEGER, body TEXT)`); err != nil {
		return 0, err
	}
	body := `{"sku":"A-42","qty":3,"note":"leave at the door"}`
	start := time.Now()
	for i := 0; i < rows; i += batch {
		tx, err := db.Begin()
		if err != nil {
			return 0, err
		}
		st, err := tx.Prepare(`INSERT INTO orders (id, amount, body) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`)
		if err != nil {
			return 0, err
		}
		for j := i; j < i+batch && j < rows; j++ {
			if _, err := st.Exec(fmt.Sprintf("order-%09d", j), int64(j), body); err != nil {
				return 0, err
			}
		}
		st.Close()
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return float64(rows) / time.Since(start).Seconds(), nil
}
