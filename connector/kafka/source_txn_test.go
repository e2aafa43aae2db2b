package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// txnProducer is a transactional producer of orders {"order_id":"o-N",
// "amount":N}, each transaction produced and flushed before it ends.
type txnProducer struct {
	t  *testing.T
	cl *kgo.Client
}

func newTxnProducer(t *testing.T, brokers, id string) *txnProducer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &txnProducer{t: t, cl: cl}
}

func (p *txnProducer) begin() {
	p.t.Helper()
	if err := p.cl.BeginTransaction(); err != nil {
		p.t.Fatal(err)
	}
}

func (p *txnProducer) produce(nums ...int) {
	p.t.Helper()
	for _, n := range nums {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("o-%d", n)), Value: []byte(fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, n, n))}
		if err := p.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			p.t.Fatal(err)
		}
	}
}

func (p *txnProducer) end(commit bool) {
	p.t.Helper()
	if err := p.cl.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
		p.t.Fatal(err)
	}
}

// TestKafkaSourceReadsCommittedOnly: a topic written by transactional
// producers holds commit and abort markers and the records of aborted
// transactions. kafka-go's Reader handed both on: the markers as records
// (a JSON route stopped on "invalid JSON at byte 0: unexpected '\x00'"),
// and the aborted records as if they had been written. The source reads
// at read_committed: here two producers interleave their transactions on
// one partition, one aborting, beside records of a plain producer; a
// transaction still open is not read until it commits. With and without
// a consumer group.
func TestKafkaSourceReadsCommittedOnly(t *testing.T) {
	defer func(d time.Duration) { kafkaHeldWarn = d }(kafkaHeldWarn)
	kafkaHeldWarn = 200 * time.Millisecond
	for _, group := range []string{"", "txn-readers"} {
		t.Run(map[string]string{"": "partitions", "txn-readers": "group"}[group], func(t *testing.T) {
			brokers := testsrv.Kafka(t, "orders:1")
			d := t.TempDir()
			db, state := filepath.Join(d, "orders.db"), filepath.Join(d, "state")
			a, b := newTxnProducer(t, brokers, "a"), newTxnProducer(t, brokers, "b")

			a.begin()
			b.begin()
			a.produce(0, 1)
			b.produce(100, 101) // aborted below
			a.produce(2)
			produceOrders(t, brokers, "orders", 200, 2) // not transactional
			b.produce(102)
			a.end(true)
			b.end(false)
			b.begin()
			b.produce(3, 4)
			b.end(true)
			a.begin()
			a.produce(5, 6) // open while the route first runs
			want := []string{"o-0", "o-1", "o-2", "o-200", "o-201", "o-3", "o-4"}

			p := kafkaSQLitePlan(brokers, "orders", group, state, db, 4, 1)
			var logs runtest.Logs
			opts := runtest.Options()
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			r := runtest.Start(context.Background(), p, opts)
			defer r.Stop(t)
			if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) >= len(want) }, 20*time.Second, 50*time.Millisecond) {
				t.Fatalf("%d rows after 20s, want %d", runtest.CountRows(t, db), len(want))
			}
			time.Sleep(800 * time.Millisecond) // anything more it would read
			if got := ids(t, db); !slices.Equal(got, sorted(want)) {
				t.Fatalf("with a transaction open the table holds %q, want %q", got, sorted(want))
			}
			if !strings.Contains(logs.String(), "transaction still open") {
				t.Errorf("no warning that an open transaction holds the partition back; the log:\n%s", logs.String())
			}
			a.end(true)
			want = append(want, "o-5", "o-6")
			if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) >= len(want) }, 20*time.Second, 50*time.Millisecond) {
				t.Fatalf("%d rows after the commit, want %d", runtest.CountRows(t, db), len(want))
			}
			time.Sleep(300 * time.Millisecond)
			if rs := r.Stop(t).Route("consume"); rs.Errors != 0 || rs.DeadLettered != 0 || rs.In != int64(len(want)) {
				t.Errorf("stats %+v, want %d records in and no error", rs, len(want))
			}
			if got := ids(t, db); !slices.Equal(got, sorted(want)) {
				t.Errorf("the table holds %q, want %q", got, sorted(want))
			}
		})
	}
}

func ids(t *testing.T, db string) []string {
	t.Helper()
	var out []string
	for id := range runtest.SQLiteMap[int](t, db, `SELECT id, amount FROM orders`) {
		out = append(out, id)
	}
	return sorted(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
