package testsrv_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// mqb-testbroker as a separate process: records and committed offsets
// survive a SIGTERM restart on the same port, and a SIGKILL.
func TestKafkaProcess(t *testing.T) {
	start := time.Now()
	k := testsrv.NewKafkaProcess(t, kafkabroker.Config{Topics: []string{"orders"}})
	t.Logf("mqb-testbroker (build and start) ready in %s: %s", time.Since(start), k.Brokers())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	w := &kafka.Writer{Addr: kafka.TCP(k.Brokers()), Topic: "orders", RequiredAcks: kafka.RequireAll}
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("one")}, kafka.Message{Value: []byte("two")}); err != nil {
		t.Fatal(err)
	}
	consume := func() string {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{k.Brokers()}, GroupID: "g", Topic: "orders",
			MaxWait: 100 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond,
		})
		defer r.Close()
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
		return string(m.Value)
	}
	if got := consume(); got != "one" {
		t.Fatalf("first message %q", got)
	}
	addr := k.Brokers()
	start = time.Now()
	k.Restart(t, 100*time.Millisecond)
	t.Logf("restart took %s", time.Since(start))
	if k.Brokers() != addr {
		t.Fatalf("restarted on %s, was %s", k.Brokers(), addr)
	}
	if got := consume(); got != "two" {
		t.Fatalf("after restart the group read %q, want the uncommitted %q", got, "two")
	}

	// After a SIGKILL the broker still has what it wrote before dying.
	if err := w.WriteMessages(ctx, kafka.Message{Value: []byte("three")}); err != nil {
		t.Fatal(err)
	}
	k.Kill(t)
	k.Start(t)
	if got := consume(); got != "three" {
		t.Fatalf("after a kill the group read %q, want %q", got, "three")
	}
}
