package testsrv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The broker must serve what the Kafka connectors use: a Writer, and a
// Reader in a consumer group committing offsets that survive a restart.
func TestKafka(t *testing.T) {
	start := time.Now()
	k := testsrv.NewKafka(t, "orders:2")
	t.Logf("Kafka broker ready in %s: %s", time.Since(start), k.Brokers())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers()), Topic: "orders", Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 10 {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	read := func(n int) map[string]bool {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{k.Brokers()}, GroupID: "g", Topic: "orders",
			MaxWait: 100 * time.Millisecond, SessionTimeout: 6 * time.Second,
			HeartbeatInterval: 500 * time.Millisecond, RebalanceTimeout: 2 * time.Second,
		})
		defer r.Close()
		got := map[string]bool{}
		for len(got) < n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("after %d messages: %v", len(got), err)
			}
			got[string(m.Value)] = true
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}
	if got := read(10); len(got) != 10 {
		t.Fatalf("read %v", got)
	}

	// Committed offsets survive a restart: the group resumes after them.
	k.Restart(t, 100*time.Millisecond)
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	if got := read(1); !got["after"] {
		t.Fatalf("after restart read %v, want only the new message", got)
	}
}

func TestKafkaInMemory(t *testing.T) {
	brokers := testsrv.Kafka(t, "events")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: "events"}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, Topic: "events", Partition: 0, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil || string(m.Value) != "hello" {
		t.Fatalf("read %q, %v", m.Value, err)
	}
}
