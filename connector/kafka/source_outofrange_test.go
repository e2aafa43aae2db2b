package kafka

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// TestKafkaSourceRecordsDeletedBeforeRead: a route read offsets 0–9 and
// stopped; ten more records came, and the first five of them were deleted
// (retention, DeleteRecords) before the route ran again. A Kafka reader
// asked for offset 10 jumps to the first offset there is, 15, and the
// five records would be passed over without a word; the route stops
// instead, naming the offsets, and reads nothing past them.
func TestKafkaSourceRecordsDeletedBeforeRead(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders:1")
	d := t.TempDir()
	db, state := filepath.Join(d, "orders.db"), filepath.Join(d, "state")
	produceOrders(t, brokers, "orders", 0, 10)
	p := kafkaSQLitePlan(brokers, "orders", "", state, db, 4, 1)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 10 })

	produceOrders(t, brokers, "orders", 10, 10)
	deleteRecords(t, brokers, "orders", 0, 15)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := runtime.Run(ctx, p, runtest.Options())
	if err == nil {
		t.Fatalf("the route ran on past deleted records: %+v", st)
	}
	for _, want := range []string{"partition 0", "offsets 10 to 14 (5)", "were deleted from the topic", "mqbc state reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := runtest.CountRows(t, db); n != 10 {
		t.Errorf("%d rows, want the 10 of the first run (nothing read past the deleted records)", n)
	}
}

// deleteRecords deletes partition part's records before offset, as the
// topic's retention would (kafka-go has no DeleteRecords; franz-go's
// client sends it).
func deleteRecords(t testing.TB, brokers, topic string, part int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = part, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), adminClient(t, brokers))
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		t.Fatalf("delete records: answer %+v", resp)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
}

// adminClient is a franz-go client for the requests kafka-go does not
// send, closed with the test.
func adminClient(t testing.TB, brokers string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaSourceRidesOutRestart: the source's check of its next offset
// against the partition's range waits for a broker that is down (a
// restart of 3 s here) instead of failing the route, and the route reads
// everything once the broker is back.
func TestKafkaSourceRidesOutRestart(t *testing.T) {
	k := testsrv.NewKafka(t, "orders:2")
	d := t.TempDir()
	db, state := filepath.Join(d, "orders.db"), filepath.Join(d, "state")
	const n = 4000
	produceOrders(t, k.Brokers(), "orders", 0, n)
	p := kafkaSQLitePlan(k.Brokers(), "orders", "", state, db, 16, 1)
	restarted := false
	st := runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool {
		if !restarted && runtest.CountRows(t, db) > 0 {
			restarted = true
			k.Restart(t, 3*time.Second)
		}
		return runtest.CountRows(t, db) == n
	})
	if !restarted {
		t.Fatal("the broker was not restarted while the route read")
	}
	runtest.CheckOrders(t, db, n)
	t.Logf("stats %+v", st.Route("consume"))
}
