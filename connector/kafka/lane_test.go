package kafka

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// padded returns n records whose payloads are {"w":w,"i":i,...} padded to
// about size bytes.
func padded(w, n, size int) []*runtime.Record {
	recs := make([]*runtime.Record, n)
	pad := strings.Repeat("x", size)
	for i := range recs {
		recs[i] = &runtime.Record{Payload: fmt.Appendf(nil, `{"w":%d,"i":%d,"pad":"%s"}`, w, i, pad)}
	}
	return recs
}

// Writes running at once (a route's concurrency) share the partition's
// lane: every record lands, and each write's records in the order given.
func TestKafkaSinkConcurrentWritesKeepOrder(t *testing.T) {
	brokers := testsrv.Kafka(t, "both:1")
	s, err := dialKafkaSink(context.Background(), "publish", []string{brokers}, "both", kafkaSecurity{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const writes, n = 3, 300
	var wg sync.WaitGroup
	errs := make([]error, writes)
	for w := range writes {
		wg.Go(func() { errs[w] = s.Write(context.Background(), padded(w, n, 2000)) })
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", w, err)
		}
	}
	msgs := readPartition(t, brokers, "both", 0)
	if len(msgs) != writes*n {
		t.Fatalf("%d messages, want %d", len(msgs), writes*n)
	}
	next := make([]int, writes)
	for _, m := range msgs {
		var w, i int
		if _, err := fmt.Sscanf(string(m.Value), `{"w":%d,"i":%d,`, &w, &i); err != nil || w < 0 || w >= writes {
			t.Fatalf("message at offset %d: %.20s (%v)", m.Offset, m.Value, err)
		}
		if i != next[w] {
			t.Fatalf("write %d: record %d at offset %d, want %d", w, i, m.Offset, next[w])
		}
		next[w]++
	}
}

// A request the broker refuses fails its write, which sends nothing more
// to that partition (the route writes the whole of it again, or stops);
// the lane carries on with the next write.
func TestKafkaSinkRefusedRequestFailsItsWrite(t *testing.T) {
	k := testsrv.NewKafka(t, "refuse:1")
	s, err := dialKafkaSink(context.Background(), "publish", []string{k.Brokers()}, "refuse", kafkaSecurity{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED, not worth another attempt
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	// 40 records of 30 KB: several segments, the first request refused.
	err = s.Write(context.Background(), padded(0, 40, 30<<10))
	if !runtime.IsRetryable(err) || !strings.Contains(err.Error(), "40 of 40 messages failed") {
		t.Fatalf("write over a refused request: %v, want a retryable error for all 40", err)
	}
	if got := readPartition(t, k.Brokers(), "refuse", 0); len(got) != 0 {
		t.Fatalf("%d messages after the refused request, want none: the rest of the write must not be sent", len(got))
	}
	if err := s.Write(context.Background(), padded(1, 5, 100)); err != nil {
		t.Fatalf("next write: %v", err)
	}
	if got := readPartition(t, k.Brokers(), "refuse", 0); len(got) != 5 {
		t.Fatalf("%d messages, want the next write's 5", len(got))
	}
}
