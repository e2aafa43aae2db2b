package kafka

import (
	"testing"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/runtime"
)

// TestPremiseProducerIDKafka: only an mq_bridge.message_id header that
// parses is a producer-stamped id; a 16-byte key or the offset gives a
// stable id, not a stamped one.
func TestPremiseProducerIDKafka(t *testing.T) {
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	for _, tc := range []struct {
		name string
		m    kafkago.Message
		want bool
	}{
		{"header text", kafkago.Message{Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: []byte(id.String())}}}, true},
		{"header raw", kafkago.Message{Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: id[:]}}}, true},
		{"16-byte key", kafkago.Message{Key: []byte("0123456789abcdef")}, false},
		{"bad header", kafkago.Message{Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: []byte("nope")}}}, false},
		{"nothing", kafkago.Message{Partition: 1, Offset: 2}, false},
	} {
		if got := kafkaStamped(&tc.m); got != tc.want {
			t.Errorf("%s: stamped %v, want %v", tc.name, got, tc.want)
		}
	}
	s := &kafkaSource{}
	s.RequireProducerID("dedup: key message_id")
	b := runtime.NewBatch(2)
	s.add(b, kafkaMsg{m: kafkago.Message{Value: []byte(`{}`), Offset: 5}})
	s.add(b, kafkaMsg{m: kafkago.Message{Value: []byte(`{}`), Offset: 6, Headers: []kafkago.Header{{Key: runtime.HeaderMessageID, Value: id[:]}}}})
	recs := b.Records()
	if recs[0].DeadLettered() == "" || recs[1].DeadLettered() != "" {
		t.Errorf("dead-lettered %q %q: want the unstamped record dead, the stamped one live", recs[0].DeadLettered(), recs[1].DeadLettered())
	}
}
