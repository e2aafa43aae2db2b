//go:build chaos

package chaos

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/segmentio/kafka-go"
	"google.golang.org/api/iterator"
)

// countGCS counts the records of every object under lake/orders/.
func countGCS(t *testing.T, client *storage.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[string]int{}
	it := client.Bucket("lake").Objects(ctx, &storage.Query{Prefix: "orders/"})
	for {
		attrs, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := client.Bucket("lake").Object(attrs.Name).NewReader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		countIDs(t, attrs.Name, data, got)
	}
	return got
}

// countKafka reads every partition of topic from the start to its end.
func countKafka(t *testing.T, brokers, topic string, partitions int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := map[string]int{}
	addrs := strings.Split(brokers, ",")
	for p := range partitions {
		conn, err := kafka.DialLeader(ctx, "tcp", addrs[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: addrs, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
		for i := int64(0); i < last; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d message %d: %v", p, i, err)
			}
			countIDs(t, topic, m.Value, got)
		}
		r.Close()
	}
	return got
}

// produce writes each line of lines as a message to topic, keyed by
// nothing (round-robin over the partitions), and waits for the acks.
func produce(t *testing.T, brokers, topic, lines string) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(strings.Split(brokers, ",")...), Topic: topic,
		Balancer: &kafka.RoundRobin{}, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000}
	defer w.Close()
	var msgs []kafka.Message
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		msgs = append(msgs, kafka.Message{Value: []byte(l)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

func jetStream(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// publish publishes each line of lines to subject and waits for the acks.
func publish(t *testing.T, js jetstream.JetStream, subject, lines string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		if _, err := js.PublishAsync(subject, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("JetStream did not ack the published input within a minute")
	}
}

// createStream makes the JetStream stream the nats sink publishes into.
func createStream(t *testing.T, url string) jetstream.Stream {
	t.Helper()
	js := jetStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// countStream reads every message the stream holds.
func countStream(t *testing.T, stream jetstream.Stream) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream message %d: %v", seq, err)
		}
		countIDs(t, "stream ORDERS", m.Data, got)
	}
	return got
}
