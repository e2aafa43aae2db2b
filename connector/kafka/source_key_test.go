package kafka

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestKafkaSourceKeyAndTombstone: with source_metadata the message key is
// meta["mqb.src.key"] (absent for a message without one, or with an empty one), and a tombstone
// (a null value, a compacted topic's delete) is the payload null under
// format = json, which a route can route or bind, where it was an empty
// line that failed to decode (to the DLQ, saying "unexpected end of
// input").
func TestKafkaSourceKeyAndTombstone(t *testing.T) {
	brokers := testsrv.Kafka(t, "keyed:1")
	w := &kafkago.Writer{Addr: kafkago.TCP(brokers), Topic: "keyed", RequiredAcks: kafkago.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(context.Background(),
		kafkago.Message{Key: []byte("k1"), Value: []byte(`{"v":1}`)},
		kafkago.Message{Key: []byte("k1"), Value: nil},
		kafkago.Message{Value: []byte(`{"v":3}`)},
	); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := plantest.Compile(t, fmt.Sprintf(`route r {
  from kafka { url = %q, topic = "keyed", source_metadata = true }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (off INTEGER PRIMARY KEY, k TEXT, deleted INTEGER, body TEXT)"
    insert_query = "INSERT INTO orders (off, k, deleted, body) VALUES (${meta[\"mqb.src.offset\"]}, ${\"mqb.src.key\" in meta ? meta[\"mqb.src.key\"] : \"(none)\"}, ${payload == nil}, ${payload}) ON CONFLICT (off) DO NOTHING"
  }
}`, brokers))
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
	db := filepath.Join(dir, "out.db")
	st := runtest.RunUntil(t, p, opts, time.Minute, func() bool { return runtest.CountRows(t, db) == 3 })
	if rs := st.Route("r"); rs.Out != 3 || rs.DeadLettered != 0 {
		t.Errorf("stats %+v: want 3 out, none dead-lettered", rs)
	}
	conn, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT k, deleted, coalesce(body, 'NULL') FROM orders ORDER BY off`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var k, body string
		var deleted int
		rows.Scan(&k, &deleted, &body)
		got = append(got, fmt.Sprintf("%s %d %s", k, deleted, body))
	}
	want := []string{`k1 0 {"v":1}`, `k1 1 NULL`, `(none) 0 {"v":3}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("rows %q, want %q", got, want)
	}
}
