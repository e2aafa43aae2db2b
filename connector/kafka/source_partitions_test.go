package kafka

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// addPartitions grows topic to count partitions, as an operator scaling
// it out does.
func addPartitions(t testing.TB, brokers, topic string, count int32) {
	t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, count
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), adminClient(t, brokers))
	if err == nil && len(resp.Topics) != 1 {
		t.Fatalf("create partitions: answer %+v", resp)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create partitions: %v", err)
	}
}

// produceTo writes orders from..from+n-1 to partition part only.
func produceTo(t testing.TB, brokers, topic string, part, from, n int) {
	t.Helper()
	w := &kafkago.Writer{Addr: kafkago.TCP(strings.Split(brokers, ",")...), Topic: topic, RequiredAcks: kafkago.RequireAll,
		Balancer: kafkago.BalancerFunc(func(kafkago.Message, ...int) int { return part }), BatchTimeout: time.Millisecond,
		Transport: &kafkago.Transport{}} // its own metadata: the shared transport's may predate the partition
	defer w.Close()
	var msgs []kafkago.Message
	for i := from; i < from+n; i++ {
		msgs = append(msgs, kafkago.Message{Key: fmt.Appendf(nil, "o-%d", i), Value: fmt.Appendf(nil, `{"order_id":"o-%d","amount":%d}`, i, i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// rowsOf counts the rows the route wrote from partition part.
func rowsOf(t testing.TB, db string, part int) int {
	t.Helper()
	return runtest.SQLiteMap[int](t, db, `SELECT CAST(part AS TEXT), count(*) FROM orders GROUP BY part`)[fmt.Sprint(part)]
}

// TestKafkaSourceReadsAddedPartition: partitions added to the topic while
// the route runs are read, from their first record, without a restart:
// by the source itself without a consumer group, by a rebalance the
// group's leader starts with one.
func TestKafkaSourceReadsAddedPartition(t *testing.T) {
	defer func(w time.Duration) { kafkaPartitionWatch = w }(kafkaPartitionWatch)
	kafkaPartitionWatch = 300 * time.Millisecond
	for _, group := range []string{"", "grow"} {
		t.Run("group="+group, func(t *testing.T) {
			brokers := testsrv.Kafka(t, "orders:1")
			d := t.TempDir()
			db := filepath.Join(d, "orders.db")
			p := kafkaSQLitePlan(brokers, "orders", group, filepath.Join(d, "state"), db, 16, 1)
			produceOrders(t, brokers, "orders", 0, 20)
			r := runtest.Start(context.Background(), p, runtest.Options())
			defer r.Stop(t)
			if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == 20 }, 30*time.Second, 50*time.Millisecond) {
				t.Fatalf("%d rows before the partitions were added, want 20", runtest.CountRows(t, db))
			}
			addPartitions(t, brokers, "orders", 3)
			produceTo(t, brokers, "orders", 1, 20, 30)
			produceTo(t, brokers, "orders", 2, 50, 30)
			if !runtest.WaitFor(func() bool { return runtest.CountRows(t, db) == 80 }, 45*time.Second, 50*time.Millisecond) {
				t.Fatalf("%d rows (%d from partition 1, %d from partition 2), want 80: the added partitions were not read while the route ran",
					runtest.CountRows(t, db), rowsOf(t, db, 1), rowsOf(t, db, 2))
			}
			r.Stop(t)
			runtest.CheckOrders(t, db, 80)
		})
	}
}

// TestKafkaSourceAddedPartitionRecordsDeleted: a partition added to the
// topic while the route was stopped, whose first records the topic's
// retention deleted before the route ran again, stops the route, naming
// them; a reader starting at the first offset there is would pass over
// them without a word. A partition that was already there at the route's
// first start, idle, its records deleted before the route existed, does
// not.
func TestKafkaSourceAddedPartitionRecordsDeleted(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders:2")
	d := t.TempDir()
	db := filepath.Join(d, "orders.db")
	p := kafkaSQLitePlan(brokers, "orders", "", filepath.Join(d, "state"), db, 4, 1)
	// Partition 1 had records before the route existed, all deleted.
	produceTo(t, brokers, "orders", 1, 1000, 5)
	deleteRecords(t, brokers, "orders", 1, 5)
	produceTo(t, brokers, "orders", 0, 0, 10)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 10 })
	produceTo(t, brokers, "orders", 0, 10, 10)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 20 })

	// Every partition is named in the checkpoint, idle partition 1 too.
	state := filepath.Join(d, "state")
	cp := loadCheckpoint(t, state)
	if _, ok := cp.Partitions[1]; !ok || cp.Mode != modeAllNamed {
		t.Fatalf("checkpoint %+v does not name idle partition 1", cp)
	}

	// A checkpoint of an mqb before that named only the partitions it
	// read from: partition 1 is read from its first kept offset, as then.
	delete(cp.Partitions, 1)
	cp.Mode = "partitions"
	saveCheckpoint(t, state, cp)
	produceTo(t, brokers, "orders", 1, 1005, 5)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 25 })

	addPartitions(t, brokers, "orders", 3)
	produceTo(t, brokers, "orders", 2, 20, 10)
	deleteRecords(t, brokers, "orders", 2, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := runtime.Run(ctx, p, runtest.Options())
	if err == nil {
		t.Fatalf("the route ran on past the deleted records of the added partition: %+v", st)
	}
	for _, want := range []string{"partition 2", "offsets 0 to 4 (5)", "were deleted from the topic"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := rowsOf(t, db, 2); n != 0 {
		t.Errorf("%d rows from partition 2, want none (nothing read past the deleted records)", n)
	}
}

// loadCheckpoint reads route consume's checkpoint from the Pebble store
// in dir.
func loadCheckpoint(t testing.TB, dir string) checkpoint.Position {
	t.Helper()
	st, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, ok, err := st.Load("consume")
	if err != nil || !ok {
		t.Fatalf("checkpoint of consume: %v (found %v)", err, ok)
	}
	return cp
}

// saveCheckpoint writes cp as route consume's checkpoint in dir.
func saveCheckpoint(t testing.TB, dir string, cp checkpoint.Position) {
	t.Helper()
	st, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Save("consume", cp); err != nil {
		t.Fatal(err)
	}
}

// TestKafkaGroupWarnsWithoutCommittedOffset: a group with no committed
// offset for a partition whose first records the topic deleted reads from
// the first offset kept, and says that records before it were never read
// if the group had read the partition before (its offsets expired). A
// group's first start on a topic that never lost a record says nothing.
func TestKafkaGroupWarnsWithoutCommittedOffset(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleted=%v", deleted), func(t *testing.T) {
			brokers := testsrv.Kafka(t, "orders:1")
			d := t.TempDir()
			db := filepath.Join(d, "orders.db")
			produceTo(t, brokers, "orders", 0, 0, 10)
			want := 10
			if deleted {
				deleteRecords(t, brokers, "orders", 0, 4)
				want = 6
			}
			var logs runtest.Logs
			p := kafkaSQLitePlan(brokers, "orders", "expired", filepath.Join(d, "state"), db, 4, 1)
			runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == want })
			said := strings.Contains(logs.String(), "offsets expired")
			if said != deleted {
				t.Errorf("warned %v, want %v; logs:\n%s", said, deleted, logs.String())
			}
			if deleted && !strings.Contains(logs.String(), "first_offset=4") {
				t.Errorf("the warning does not name the first offset kept:\n%s", logs.String())
			}
		})
	}
}
