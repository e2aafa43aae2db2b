package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func TestKafkaSink(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders:3")
	e := plantest.NewEnv(t)
	const n = 3000
	lines := plantest.WriteOrders(t, e.Input, n)
	sink := plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{
		"url": plantest.Str(brokers), "topic": plantest.Str("orders"),
		"partition_key": plantest.Tmpl(plantest.Lit("key-"), plantest.Ex(`meta["mqb.id"]`))}}
	rs := runtest.RunRoute(t, context.Background(), plantest.SinkPlan(e.Input, e.State, 256, sink), runtest.Options(), "publish")
	if rs.Out != n {
		t.Fatalf("stats %+v, want out %d", rs, n)
	}

	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	ids := map[string]bool{}
	got := 0
	var hash kafkago.Hash
	for p := range 3 {
		for _, m := range readPartition(t, brokers, "orders", p) {
			got++
			if !want[string(m.Value)] {
				t.Errorf("unexpected or repeated payload %s", m.Value)
			}
			delete(want, string(m.Value))
			h := map[string]string{}
			for _, x := range m.Headers {
				h[x.Key] = string(x.Value)
			}
			orderID := strings.TrimSuffix(strings.SplitN(string(m.Value), `"`, 5)[3], `"`)
			if string(m.Key) != "key-"+orderID {
				t.Errorf("key %q, want key-%s", m.Key, orderID)
			}
			// The partition other producers using sarama's hash pick.
			if want := hash.Balance(kafkago.Message{Key: m.Key}, 0, 1, 2); want != p {
				t.Errorf("key %s on partition %d, want %d", m.Key, p, want)
			}
			if d := time.Since(m.Time); d < 0 || d > time.Minute {
				t.Errorf("message time %v, want the write time", m.Time)
			}
			if h["mqb.id"] != orderID {
				t.Errorf("header mqb.id %q, want %s", h["mqb.id"], orderID)
			}
			id, err := uuid.Parse(h[runtime.HeaderMessageID])
			if err != nil || len(h[runtime.HeaderMessageID]) != 36 {
				t.Errorf("header %s = %q: want a UUID string (%v)", runtime.HeaderMessageID, h[runtime.HeaderMessageID], err)
			} else if id.Version() != 7 {
				t.Errorf("message_id %s is a version %d UUID, want 7", id, id.Version())
			} else if ids[id.String()] {
				t.Errorf("message_id %s on two messages", id)
			}
			ids[id.String()] = true
		}
	}
	if got != n || len(want) != 0 {
		t.Errorf("read %d messages, %d payloads missing", got, len(want))
	}
}

func TestKafkaSinkMissingTopic(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders")
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 1)
	sink := plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{"url": plantest.Str(brokers), "topic": plantest.Str("nosuch")}}
	runtest.RunRefused(t, plantest.SinkPlan(e.Input, e.State, 16, sink), []string{"route publish", "topic"})
}

// readPartition reads every message of topic's partition p.
func readPartition(t *testing.T, brokers, topic string, p int) []kafkago.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := kafkago.DialLeader(ctx, "tcp", strings.Split(brokers, ",")[0], topic, p)
	if err != nil {
		t.Fatal(err)
	}
	last, err := conn.ReadLastOffset()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: strings.Split(brokers, ","), Topic: topic,
		Partition: p, MaxWait: 100 * time.Millisecond, MaxBytes: 4 << 20})
	defer r.Close()
	var out []kafkago.Message
	for int64(len(out)) < last {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("partition %d message %d: %v", p, len(out), err)
		}
		out = append(out, m)
	}
	return out
}

// One write larger than the broker's message limit goes out as several
// record batches, in order; a record over the limit fails alone (to the
// DLQ), the rest of its write is published.
func TestKafkaSinkChunksInOrder(t *testing.T) {
	brokers := testsrv.Kafka(t, "big:1")
	s, err := dialKafkaSink(context.Background(), "publish", []string{brokers}, "big", kafkaSecurity{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	pad := strings.Repeat("x", 100<<10)
	recs := make([]*runtime.Record, n)
	for i := range recs {
		recs[i] = &runtime.Record{Payload: fmt.Appendf(nil, `{"i":%d,"pad":"%s"}`, i, pad)}
	}
	recs[17].Payload = fmt.Appendf(nil, `{"i":17,"pad":"%s"}`, strings.Repeat("y", kafkaMaxMessageBytes))
	if err := s.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if (i == 17) != strings.Contains(r.Refused(), "exceeds the 1048576-byte message limit") {
			t.Errorf("record %d: sink error %q", i, r.Refused())
		}
	}
	msgs := readPartition(t, brokers, "big", 0)
	if len(msgs) != n-1 {
		t.Fatalf("%d messages, want %d", len(msgs), n-1)
	}
	next := 0
	for _, m := range msgs {
		if next == 17 {
			next++
		}
		if want := fmt.Sprintf(`{"i":%d,`, next); !strings.HasPrefix(string(m.Value), want) {
			t.Fatalf("message at offset %d starts %.12s, want %s", m.Offset, m.Value, want)
		}
		next++
	}
}

// TestKafkaSinkReleasesRecords: the sink says it keeps no record past
// Write (runtime.ReleasingSink), so the route reuses its batches; payloads
// written over in place once Write returned, as a reused batch's arena
// is, change nothing the broker holds.
func TestKafkaSinkReleasesRecords(t *testing.T) {
	brokers := testsrv.Kafka(t, "reuse:2")
	s, err := dialKafkaSink(context.Background(), "publish", []string{brokers}, "reuse", kafkaSecurity{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rs runtime.ReleasingSink = s
	if !rs.ReleasesRecords() {
		t.Fatal("the kafka sink does not say it releases records")
	}
	// Its lanes pipeline the writes: it asks for writes of a few thousand
	// records, not the route's default of 16 batches.
	if ws, ok := any(s).(runtime.WriteSizer); !ok || ws.WriteSize() != kafkaWriteSize {
		t.Errorf("the kafka sink does not ask for writes of %d records", kafkaWriteSize)
	}
	const n = 5000
	arena := make([]byte, 0, n*16)
	recs := make([]*runtime.Record, n)
	for i := range recs {
		start := len(arena)
		arena = fmt.Appendf(arena, `{"i":%06d}`, i)
		recs[i] = &runtime.Record{Payload: arena[start:len(arena):len(arena)]}
	}
	if err := s.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	for i := range arena {
		arena[i] = 'x'
	}
	want := map[string]bool{}
	for i := range n {
		want[fmt.Sprintf(`{"i":%06d}`, i)] = true
	}
	for p := range 2 {
		for _, m := range readPartition(t, brokers, "reuse", p) {
			if !want[string(m.Value)] {
				t.Errorf("partition %d offset %d: payload %q, not one written or a repeat", p, m.Offset, m.Value)
			}
			delete(want, string(m.Value))
		}
	}
	if len(want) != 0 {
		t.Errorf("%d payloads missing", len(want))
	}
}

// Partitions added to the topic while the sink runs receive records once
// the sink rereads the count.
func TestKafkaSinkRecountsPartitions(t *testing.T) {
	brokers := testsrv.Kafka(t, "grow:1")
	ctx := context.Background()
	s, err := dialKafkaSink(ctx, "publish", []string{brokers}, "grow", kafkaSecurity{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(n int) {
		recs := make([]*runtime.Record, n)
		for i := range recs {
			recs[i] = &runtime.Record{Payload: []byte(`{}`)}
		}
		if err := s.Write(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	write(30)
	res, err := s.client.CreatePartitions(ctx, &kafkago.CreatePartitionsRequest{
		Topics: []kafkago.TopicPartitionsConfig{{Name: "grow", Count: 3}}})
	if err == nil && len(res.Errors) > 0 {
		err = res.Errors["grow"]
	}
	if err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	write(30) // within kafkaRecountEvery: still one partition
	s.mu.Lock()
	s.counted = time.Now().Add(-kafkaRecountEvery - time.Second)
	s.mu.Unlock()
	// The transport caches metadata for up to its MetadataTTL; dropping
	// its connection pools stands in for that wait.
	s.transport.CloseIdleConnections()
	write(30)
	got := []int{len(readPartition(t, brokers, "grow", 0)), len(readPartition(t, brokers, "grow", 1)), len(readPartition(t, brokers, "grow", 2))}
	if got[0] != 70 || got[1] != 10 || got[2] != 10 {
		t.Errorf("partitions hold %v, want [70 10 10] (60 before the recount, then round-robin)", got)
	}
}

// BenchmarkKafkaSink: file → id → kafka on the in-process Kafka-protocol
// broker, with a key (mqb.id: records hashed to partitions) and without
// (round-robin).
func BenchmarkKafkaSink(b *testing.B) {
	const n = 100000
	brokers := testsrv.Kafka(b, "bench:3")
	input, size := plantest.BenchInput(b, n)
	for _, keyed := range []bool{true, false} {
		name := "keyless"
		if keyed {
			name = "keyed"
		}
		b.Run(name, func(b *testing.B) {
			runtest.Bench(b, n, size, func(i int, state string) plan.Plan {
				attrs := map[string]plan.Value{"url": plantest.Str(brokers), "topic": plantest.Str("bench")}
				if keyed {
					attrs["partition_key"] = plantest.Tmpl(plantest.Ex(`meta["mqb.id"]`))
				}
				p := plantest.SinkPlan(input, state, 1024, plan.Node{Kind: "kafka", Attrs: attrs})
				p.Routes[0].Concurrency = 1
				return p
			})
		})
	}
}

// publishThroughRestart publishes n orders to a fresh two-partition topic
// and restarts the broker, away for down, at the run's first progress
// report; retries, when not 0, are the attempts of a retry step before the
// sink. Every record must reach the topic, at least once (a broker cannot
// absorb a repeat).
func publishThroughRestart(t *testing.T, n int, down time.Duration, retries int64) {
	t.Helper()
	k := testsrv.NewKafka(t, "orders:2")
	e := plantest.NewEnv(t)
	lines := plantest.WriteOrders(t, e.Input, n)
	p := plantest.SinkPlan(e.Input, e.State, 256, plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{
		"url": plantest.Str(k.Brokers()), "topic": plantest.Str("orders"), "partition_key": plantest.Tmpl(plantest.Ex(`meta["mqb.id"]`))}})
	if retries != 0 {
		p = withRetry(p, retries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := runtest.Options()
	runtest.OnFirstProgress(&opts, 30*time.Millisecond, func(progress string) {
		t.Logf("restarting the broker: %s", progress)
		k.Restart(t, down)
	})
	rs := runtest.RunRoute(t, ctx, p, opts, "publish")
	total := checkTopicHasAll(t, k.Brokers(), "orders", 2, lines)
	t.Logf("%d messages for %d records (%d repeats); %+v", total, n, total-n, rs)
}

// checkTopicHasAll asserts every line is a message in one of the topic's
// parts partitions (at least once: a broker cannot absorb a repeat) and
// returns how many messages the topic holds.
func checkTopicHasAll(t *testing.T, brokers, topic string, parts int, lines []string) int {
	t.Helper()
	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	total := 0
	for part := range parts {
		for _, m := range readPartition(t, brokers, topic, part) {
			delete(want, string(m.Value))
			total++
		}
	}
	if len(want) != 0 {
		t.Errorf("%d records missing from the topic", len(want))
	}
	return total
}

// The broker restarts mid-run: with a retry step every record reaches the
// topic at least once (a broker cannot absorb a repeat).
func TestKafkaSinkBrokerRestart(t *testing.T) {
	publishThroughRestart(t, 40000, 300*time.Millisecond, 100)
}

// withRetry inserts a retry step right before the sink.
func withRetry(p plan.Plan, attempts int64) plan.Plan {
	return plantest.WithRetryAt(p, len(p.Routes[0].Nodes)-1, attempts)
}
