package testsrv

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// KafkaCluster is an in-process Kafka-protocol broker (franz-go's kfake)
// private to one test, persisting to a temp dir so Stop and Start keep its
// port, topics, records and committed group offsets.
type KafkaCluster struct {
	cfg kafkabroker.Config

	mu      sync.Mutex
	cluster *kafkabroker.Cluster
	brokers string
}

// Kafka starts an in-memory Kafka-protocol broker on 127.0.0.1 for this
// test with the given topics ("name", or "name:partitions"; one partition
// by default; unknown topics are auto-created) and returns its bootstrap
// address, 127.0.0.1:PORT. It stops when the test ends.
func Kafka(t testing.TB, topics ...string) string {
	t.Helper()
	c, err := kafkabroker.Start(kafkabroker.Config{Topics: topics})
	if err != nil {
		t.Fatalf("testsrv: %v", err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// NewKafka is Kafka with a handle to stop and restart the broker; it keeps
// its state on disk across restarts.
func NewKafka(t testing.TB, topics ...string) *KafkaCluster {
	t.Helper()
	return NewKafkaConfig(t, kafkabroker.Config{Topics: topics})
}

// NewKafkaConfig starts a broker from a full config (brokers, partitions,
// port). Without a DataDir it gets a temp dir so that restarts keep state.
func NewKafkaConfig(t testing.TB, cfg kafkabroker.Config) *KafkaCluster {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	k := &KafkaCluster{cfg: cfg}
	if err := k.start(); err != nil {
		t.Fatalf("testsrv: %v", err)
	}
	t.Cleanup(k.stop)
	return k
}

func (k *KafkaCluster) start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster != nil {
		return nil
	}
	c, err := kafkabroker.Start(k.cfg)
	if err != nil {
		return err
	}
	k.cluster = c
	k.brokers = strings.Join(c.ListenAddrs(), ",")
	if k.cfg.Port == 0 {
		// Restarts must come back where clients expect them.
		_, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
		k.cfg.Port, _ = strconv.Atoi(port)
	}
	return nil
}

func (k *KafkaCluster) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster != nil {
		k.cluster.Close()
		k.cluster = nil
	}
}

// Brokers is the comma-separated bootstrap list; it stays the same across
// Stop and Start.
func (k *KafkaCluster) Brokers() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.brokers
}

// Cluster is the running kfake cluster, for tests that inject faults with
// its Control functions; nil while stopped.
func (k *KafkaCluster) Cluster() *kfake.Cluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cluster == nil {
		return nil
	}
	return k.cluster.Cluster
}

// Stop closes the broker, saving its state; clients see connections drop.
func (k *KafkaCluster) Stop(t testing.TB) {
	t.Helper()
	k.stop()
}

// Start starts a stopped broker again on the same port and data dir.
func (k *KafkaCluster) Start(t testing.TB) {
	t.Helper()
	if err := k.start(); err != nil {
		t.Fatalf("testsrv: restart Kafka broker: %v", err)
	}
}

// Restart stops the broker, waits for downtime, and starts it again.
func (k *KafkaCluster) Restart(t testing.TB, downtime time.Duration) {
	t.Helper()
	k.Stop(t)
	time.Sleep(downtime)
	k.Start(t)
}
