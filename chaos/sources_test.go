//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The sources that read what a database or a bucket holds: object_store
// (a local directory and the GCS emulator), the sql cursor source and
// postgres_cdc. Each chunk of the dataset becomes a new object, or new rows
// of table src.

// pgDB is a connection to a PostgreSQL database of a pair; one goroutine
// at a time uses it.
type pgDB struct{ conn *pgx.Conn }

// openPostgres connects to url and runs ddl on it.
func openPostgres(t *testing.T, url string, ddl ...string) *pgDB {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, q := range ddl {
		if _, err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return &pgDB{conn}
}

// countRows runs q, which selects (id, count), and sums the counts by id.
func (db *pgDB) countRows(t *testing.T, q string) map[string]int {
	t.Helper()
	rows, err := db.conn.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	return scanCounts(t, rows)
}

// pairDatabases holds the PostgreSQL database a pair's source and sink
// share (the transactional outbox), by test.
var pairDatabases sync.Map

// pairDatabase is the same fresh PostgreSQL database for every call within
// one test: the source and the sink of a pair both ask for it.
func pairDatabase(t *testing.T) string {
	t.Helper()
	if url, ok := pairDatabases.Load(t); ok {
		return url.(string)
	}
	url := testsrv.Postgres(t)
	pairDatabases.Store(t, url)
	t.Cleanup(func() { pairDatabases.Delete(t) })
	return url
}

// order is one line of the dataset as a row of table src.
type order struct {
	OrderID string `json:"order_id"`
	Amount  int64  `json:"amount"`
	Body    string `json:"body"`
}

func parseOrders(t *testing.T, lines string) []order {
	t.Helper()
	var out []order
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		var o order
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("dataset line %q: %v", l, err)
		}
		out = append(out, o)
	}
	return out
}

// srcTable is where the sql cursor source and postgres_cdc read orders:
// n numbers the input lines (a repeated order is a row of its own).
const srcTable = `CREATE TABLE src (n BIGINT PRIMARY KEY, order_id TEXT NOT NULL, amount BIGINT NOT NULL, body TEXT NOT NULL)`

// insertOrders inserts rows into src, numbered from first, in one
// transaction.
func insertOrders(db *pgDB, first int64, rows []order) error {
	ns := make([]int64, len(rows))
	ids := make([]string, len(rows))
	amounts := make([]int64, len(rows))
	bodies := make([]string, len(rows))
	for i, o := range rows {
		ns[i], ids[i], amounts[i], bodies[i] = first+int64(i), o.OrderID, o.Amount, o.Body
	}
	_, err := db.conn.Exec(context.Background(), `INSERT INTO src (n, order_id, amount, body)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[])`, ns, ids, amounts, bodies)
	if err != nil {
		return fmt.Errorf("insert %d orders into src: %w", len(rows), err)
	}
	return nil
}

// objectName is the key of the n-th chunk: key order is chunk order, as
// the source needs (it resumes after the last key it committed).
func objectName(n int) string { return fmt.Sprintf("chunk-%05d.jsonl", n) }

var objectStoreFileSource = sourceCase{name: "object_store file://", setup: func(t *testing.T, dir string) sourceSetup {
	in := filepath.Join(dir, "lake", "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	return sourceSetup{from: `object_store { url = "file://lake/in" }`, emit: func(t *testing.T, lines string) {
		// Written aside and renamed: the prefix never shows half an object.
		tmp := filepath.Join(dir, "lake", ".chunk")
		if err := os.WriteFile(tmp, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(in, objectName(n))); err != nil {
			t.Fatal(err)
		}
		n++
	}}
}}

var objectStoreGCSSource = sourceCase{name: "object_store gs://", setup: func(t *testing.T, dir string) sourceSetup {
	srv := testsrv.NewGCS(t, "lake")
	client := srv.Client(t)
	n := 0
	return sourceSetup{from: `object_store { url = "gs://lake/in" }`,
		env: []string{"STORAGE_EMULATOR_HOST=" + srv.EmulatorHost()},
		emit: func(t *testing.T, lines string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w := client.Bucket("lake").Object("in/" + objectName(n)).NewWriter(ctx)
			if _, err := w.Write([]byte(lines)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("put object %s: %v", objectName(n), err)
			}
			n++
		}}
}}

// sqlCursorSource pages table src of the pair's database by n; a chunk is
// one transaction, committed before the next run starts (a single writer
// in cursor order: the source's contract).
var sqlCursorSource = sourceCase{name: "sql postgres", follows: true, setup: func(t *testing.T, dir string) sourceSetup {
	url := pairDatabase(t)
	h := openPostgres(t, url, srcTable)
	var next int64
	return sourceSetup{from: fmt.Sprintf(`sql { url = %q, table = "src", cursor_column = "n", poll_interval = 50ms }`, url),
		emit: func(t *testing.T, lines string) {
			rows := parseOrders(t, lines)
			if err := insertOrders(h, next, rows); err != nil {
				t.Fatal(err)
			}
			next += int64(len(rows))
		}}
}}

// pgCDCSource streams table src through a slot made before the first
// change (changes before a slot exists are not in any stream). A chunk is
// written while the run goes, in transactions of cdcTxRows rows, so kills
// land between and inside the transactions the route is reading.
var pgCDCSource = sourceCase{name: "postgres_cdc", follows: true, noDedup: true, setup: func(t *testing.T, dir string) sourceSetup {
	url := testsrv.Postgres(t)
	h := openPostgres(t, url, srcTable, `CREATE PUBLICATION mqb_chaos FOR TABLE src`,
		`SELECT pg_create_logical_replication_slot('mqb_chaos', 'pgoutput')`)
	return sourceSetup{
		from: fmt.Sprintf(`postgres_cdc { url = %q, publication = "mqb_chaos", slot_name = "mqb_chaos", checkpoint_store = "pebble://state/cdc" }`, url),
		emit: cdcInserts(t, h, false)}
}}

const cdcTxRows = 40

// cdcInserts returns an emit that writes each chunk into src in the
// background, in transactions of cdcTxRows rows, one chunk after the
// other; with firstNow, the first chunk is written before emit returns.
func cdcInserts(t *testing.T, h *pgDB, firstNow bool) func(*testing.T, string) {
	var next int64
	written := make(chan struct{})
	close(written)
	t.Cleanup(func() { <-written })
	return func(t *testing.T, lines string) {
		rows, first := parseOrders(t, lines), next
		next += int64(len(rows))
		prev, done := written, make(chan struct{})
		written = done
		insert := func() {
			defer close(done)
			<-prev
			for i := 0; i < len(rows); i += cdcTxRows {
				if err := insertOrders(h, first+int64(i), rows[i:min(i+cdcTxRows, len(rows))]); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		if firstNow && first == 0 {
			insert()
			return
		}
		go insert()
	}
}

// outboxSink is a plain INSERT (no key, no conflict clause) into the
// database the sql cursor source reads: at concurrency 1 the route runs
// with the transactional outbox, each batch's rows and the cursor position
// past them in one transaction, and the compiler proves it exactly-once.
// Every source row, repeated orders included, must be there once.
var outboxSink = sinkCase{"postgres (same database, outbox)", exactlyOnce, true, func(t *testing.T, dir string) (string, []string, func(*testing.T) map[string]int) {
	url := pairDatabase(t)
	h := openPostgres(t, url, `CREATE TABLE copy (id TEXT NOT NULL, amount BIGINT NOT NULL, body TEXT NOT NULL)`)
	to := serverSQLSink(url, "copy", "")
	return to, nil, func(t *testing.T) map[string]int {
		// Every run makes mqb_outbox when it wires the outbox: without
		// it, the pair would test the plain at-least-once path.
		var positions int
		if err := h.conn.QueryRow(context.Background(), `SELECT count(*) FROM mqb_outbox`).Scan(&positions); err != nil {
			t.Errorf("the route did not run with the transactional outbox: %v", err)
		}
		return h.countRows(t, `SELECT id, count(*) FROM copy GROUP BY id`)
	}
}}
