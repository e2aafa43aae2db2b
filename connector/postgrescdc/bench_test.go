package postgrescdc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// benchChanges is how many inserts each iteration streams, in
// transactions of benchTxn.
const benchChanges, benchTxn = 20000, 500

// benchSetup makes the database both benchmarks read: the orders table
// in publication mqb_pub, and for each iteration a fresh slot named slot
// that holds benchChanges inserts made after it was created. It returns
// the database's URL and a function that makes the slot and its changes.
func benchSetup(b *testing.B) (url string, prepare func(slot string)) {
	b.Helper()
	url = testsrv.Postgres(b)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(ctx) })
	if _, err := c.Exec(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER, body TEXT); CREATE PUBLICATION mqb_pub FOR TABLE orders`); err != nil {
		b.Fatal(err)
	}
	next := 0
	return url, func(slot string) {
		if _, err := c.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < benchChanges; i += benchTxn {
			if _, err := c.Exec(ctx, `INSERT INTO orders SELECT g, g % 997, 'order ' || g FROM generate_series($1::int, $2::int) g`, next+i, next+i+benchTxn-1); err != nil {
				b.Fatal(err)
			}
		}
		next += benchChanges
		b.Cleanup(func() { c.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, slot) })
	}
}

// BenchmarkPostgresCDCToFile: a route streams benchChanges inserts
// waiting in its slot into a JSON-lines file, each a record with its
// meta and a message_id, the route acking and checkpointing as it goes;
// timed until the file holds them all.
func BenchmarkPostgresCDCToFile(b *testing.B) {
	url, prepare := benchSetup(b)
	for i := range b.N {
		b.StopTimer()
		slot := fmt.Sprintf("bench_route_%d", i)
		prepare(slot)
		e := plantest.NewEnv(b)
		out := filepath.Join(e.Dir, "out.jsonl")
		p := plantest.Compile(b, fmt.Sprintf(`route cdc {
  batch_size = 1000
  from postgres_cdc { url = %q, publication = "mqb_pub", slot_name = %q, checkpoint_store = %q }
  to file { path = %q }
}
`, url, slot, "pebble://"+e.State, out))
		b.StartTimer()
		r := runtest.Start(context.Background(), p, runtest.Options())
		if !runtest.WaitFor(func() bool { return plantest.CountLines(out) >= benchChanges }, 5*time.Minute, 20*time.Millisecond) {
			b.Fatalf("%d lines, want %d", plantest.CountLines(out), benchChanges)
		}
		b.StopTimer()
		r.Stop(b)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchChanges)*float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}

// BenchmarkPglogreplBaseline is the baseline of
// BenchmarkPostgresCDCToFile: a plain pglogrepl loop on the same slot
// shape decodes each insert, writes its row as a JSON line to a file,
// confirms the position once a second as a consumer must, and syncs the
// file at the end; nothing is acked per record, and no checkpoint or
// identity is kept.
func BenchmarkPglogreplBaseline(b *testing.B) {
	url, prepare := benchSetup(b)
	for i := range b.N {
		b.StopTimer()
		slot := fmt.Sprintf("bench_plain_%d", i)
		prepare(slot)
		out := filepath.Join(b.TempDir(), "out.jsonl")
		b.StartTimer()
		if n := plainLoop(b, url, slot, out); n != benchChanges {
			b.Fatalf("%d changes, want %d", n, benchChanges)
		}
	}
	b.ReportMetric(float64(benchChanges)*float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}

// plainLoop streams slot until benchChanges inserts are read, writing
// each row as a JSON line to out.
func plainLoop(b *testing.B, url, slot, out string) int {
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, url+"&replication=database")
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names 'mqb_pub'"}}); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	rels := map[uint32]*pglogrepl.RelationMessage{}
	var pos pglogrepl.LSN
	n := 0
	status := time.Now().Add(time.Second)
	for n < benchChanges {
		if time.Now().After(status) {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
				b.Fatal(err)
			}
			status = time.Now().Add(time.Second)
		}
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			b.Fatal(err)
		}
		lm, err := pglogrepl.Parse(xld.WALData)
		if err != nil {
			b.Fatal(err)
		}
		switch lm := lm.(type) {
		case *pglogrepl.RelationMessage:
			rels[lm.RelationID] = lm
		case *pglogrepl.InsertMessage:
			rel := rels[lm.RelationID]
			row := make(map[string]json.RawMessage, len(lm.Tuple.Columns))
			for i, col := range lm.Tuple.Columns {
				if col.DataType == 't' {
					row[rel.Columns[i].Name] = pgTextToJSON(rel.Columns[i].DataType, col.Data)
				}
			}
			line, _ := json.Marshal(row)
			w.Write(line)
			w.WriteByte('\n')
			n++
		case *pglogrepl.CommitMessage:
			pos = lm.TransactionEndLSN
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	return n
}
