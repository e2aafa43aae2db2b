package runtime

import (
	"testing"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"
)

// TestPremiseProducerIDKafka: only an mq_bridge.message_id header that
// parses is a producer-stamped id; a 16-byte key or the offset gives a
// stable id, not a stamped one.
func TestPremiseProducerIDKafka(t *testing.T) {
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	for _, tc := range []struct {
		name string
		m    kafka.Message
		want bool
	}{
		{"header text", kafka.Message{Headers: []kafka.Header{{Key: headerMessageID, Value: []byte(id.String())}}}, true},
		{"header raw", kafka.Message{Headers: []kafka.Header{{Key: headerMessageID, Value: id[:]}}}, true},
		{"16-byte key", kafka.Message{Key: []byte("0123456789abcdef")}, false},
		{"bad header", kafka.Message{Headers: []kafka.Header{{Key: headerMessageID, Value: []byte("nope")}}}, false},
		{"nothing", kafka.Message{Partition: 1, Offset: 2}, false},
	} {
		if got := kafkaStamped(&tc.m); got != tc.want {
			t.Errorf("%s: stamped %v, want %v", tc.name, got, tc.want)
		}
	}
	s := &kafkaSource{}
	s.RequireProducerID("dedup: key message_id")
	var b batch
	s.add(&b, kafkaMsg{m: kafka.Message{Value: []byte(`{}`), Offset: 5}})
	s.add(&b, kafkaMsg{m: kafka.Message{Value: []byte(`{}`), Offset: 6, Headers: []kafka.Header{{Key: headerMessageID, Value: id[:]}}}})
	if b.recs[0].state != stDead || b.recs[1].state != stLive {
		t.Errorf("states %v %v: want the unstamped record dead, the stamped one live", b.recs[0].state, b.recs[1].state)
	}
}
