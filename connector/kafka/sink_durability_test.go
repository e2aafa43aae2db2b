package kafka

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/internal/testsrv/kafkabroker"
)

// createTopic makes topic with replicas replicas and the given settings.
func createTopic(t testing.TB, brokers, topic string, replicas int16, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, replicas
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), adminClient(t, brokers))
	if err == nil && len(resp.Topics) != 1 {
		t.Fatalf("create topic: answer %+v", resp)
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// TestKafkaSinkWarnsOnWeakDurability: the sink says at start-up when the
// topic can lose a write the broker acknowledged (one replica,
// min.insync.replicas 1), and says nothing for a topic that cannot.
func TestKafkaSinkWarnsOnWeakDurability(t *testing.T) {
	k := testsrv.NewKafkaConfig(t, kafkabroker.Config{Brokers: 3})
	createTopic(t, k.Brokers(), "single", 1, nil)
	createTopic(t, k.Brokers(), "loose", 3, nil)
	createTopic(t, k.Brokers(), "safe", 3, map[string]string{"min.insync.replicas": "2"})
	for _, c := range []struct{ topic, want string }{
		{"single", "the topic has one replica"},
		{"loose", "min.insync.replicas is 1"},
		{"safe", ""},
	} {
		t.Run(c.topic, func(t *testing.T) {
			s, err := dialKafkaSink(context.Background(), "r", strings.Split(k.Brokers(), ","), c.topic, kafkaSecurity{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.transport.CloseIdleConnections()
			var logs runtest.Logs
			s.warnDurability(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
			got := logs.String()
			switch {
			case c.want == "" && got != "":
				t.Errorf("warned about a topic that keeps what it acknowledged:\n%s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("logs do not say %q:\n%s", c.want, got)
			}
		})
	}
}
