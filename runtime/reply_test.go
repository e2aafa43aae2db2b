package runtime

import (
	"log/slog"
	"math"
	"testing"
)

// replyRecorder is a source that takes replies; the engine calls nothing
// else of it here.
type replyRecorder struct {
	Source
	got []Reply
}

func (s *replyRecorder) Reply(r []Reply) { s.got = append(s.got, r...) }

// TestReplySelectsDeliveredRecords: only records still live after the
// sink (delivered) get a reply, with their payload encoded as the steps
// left it; filtered, repeated and dead records get none, nor does one
// whose value cannot be encoded.
func TestReplySelectsDeliveredRecords(t *testing.T) {
	src := &replyRecorder{}
	rt := &route{name: "r", log: slog.New(slog.DiscardHandler), src: src}
	b := &batch{recs: []Record{
		{Seq: 0, Payload: []byte(`{"a":1}`)},
		{Seq: 1, Payload: []byte(`{"a":2}`), state: stFiltered},
		{Seq: 2, Payload: []byte(`{"a":3}`), state: stDuplicate},
		{Seq: 3, Payload: []byte(`{"a":4}`), state: stDead},
		{Seq: 4, Payload: []byte(`{"a":5}`), value: map[string]any{"a": 5, "b": "x"}, dirty: true},
		{Seq: 5, Payload: []byte(`{"a":6}`), value: math.NaN(), dirty: true},
		{Seq: 6, Payload: []byte(`{"i":0}`), kid: 1, kids: 2},
	}}
	rt.reply([]*batch{b})
	want := []Reply{
		{Seq: 0, Payload: []byte(`{"a":1}`)},
		{Seq: 4, Payload: []byte(`{"a":5,"b":"x"}`)},
		{Seq: 6, Kid: 1, Kids: 2, Payload: []byte(`{"i":0}`)},
	}
	if len(src.got) != len(want) {
		t.Fatalf("replies %+v, want %+v", src.got, want)
	}
	for i, w := range want {
		g := src.got[i]
		if g.Seq != w.Seq || g.Kid != w.Kid || g.Kids != w.Kids || string(g.Payload) != string(w.Payload) {
			t.Errorf("reply %d: %+v (%s), want %+v (%s)", i, g, g.Payload, w, w.Payload)
		}
	}

	// A source that takes no replies is not asked.
	rt.src = nil
	rt.reply([]*batch{b})
}
