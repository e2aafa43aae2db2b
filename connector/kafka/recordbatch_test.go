package kafka

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/mqb-dev/mqb/runtime"
)

// decodedRecord is a record as kafka-go's decoder reads it back.
type decodedRecord struct {
	offset  int64
	time    int64 // ms
	key     *string
	value   string
	headers []string // "key=value", or "key" for a null value
}

// decodeRecordSet reads set with kafka-go's record set decoder, which
// checks the CRC.
func decodeRecordSet(t *testing.T, set []byte) []decodedRecord {
	t.Helper()
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(set)); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if rs.Version != 2 {
		t.Errorf("record set version %d, want 2", rs.Version)
	}
	var out []decodedRecord
	for {
		r, err := rs.Records.ReadRecord()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read record %d: %v", len(out), err)
		}
		d := decodedRecord{offset: r.Offset, time: r.Time.UnixMilli()}
		if r.Key != nil {
			k, _ := io.ReadAll(r.Key)
			d.key = new(string(k))
		}
		if r.Value != nil {
			v, _ := io.ReadAll(r.Value)
			d.value = string(v)
		}
		for _, h := range r.Headers {
			if h.Value == nil {
				d.headers = append(d.headers, h.Key)
			} else {
				d.headers = append(d.headers, h.Key+"="+string(h.Value))
			}
		}
		out = append(out, d)
	}
}

// A request's record set, over segments of two writes, reads back with
// every record in order: offsets counted from 0, each write's time, keys
// (none, empty, long), values (empty, long enough for two-byte lengths)
// and headers (a null value, an empty one).
func TestRecordBatchReadsBack(t *testing.T) {
	long := strings.Repeat("v", 300)
	t0 := time.UnixMilli(1_700_000_000_000)
	w1 := &laneWrite{time: t0, msgs: []kafkaOut{
		{rec: &runtime.Record{Payload: []byte(`{"a":1}`)}},
		{rec: &runtime.Record{Payload: []byte(long)}, key: []byte("k1"),
			headers: []kafkago.Header{{Key: "mq_bridge.message_id", Value: []byte("id-1")}, {Key: "empty", Value: []byte{}}}},
		{rec: &runtime.Record{Payload: []byte{}}, key: []byte{}, headers: []kafkago.Header{{Key: "null"}}},
	}}
	w2 := &laneWrite{time: t0.Add(250 * time.Millisecond), msgs: []kafkaOut{
		{rec: &runtime.Record{Payload: []byte("second")}, key: []byte(long)},
	}}
	segs := []laneSegment{{w: w1, idx: []int32{0, 2}}, {w: w2, idx: []int32{0}}, {w: w1, idx: []int32{1}}}
	k1, empty := "k1", ""
	want := []decodedRecord{
		{offset: 0, time: t0.UnixMilli(), value: `{"a":1}`},
		{offset: 1, time: t0.UnixMilli(), key: &empty, value: "", headers: []string{"null"}},
		{offset: 2, time: t0.UnixMilli() + 250, key: &long, value: "second"},
		{offset: 3, time: t0.UnixMilli(), key: &k1, value: long, headers: []string{"mq_bridge.message_id=id-1", "empty="}},
	}
	prefix := []byte("kept")
	set := appendRecordSet(prefix, segs)
	if !bytes.HasPrefix(set, []byte("kept")) {
		t.Fatalf("appendRecordSet overwrote what buf held")
	}
	got := decodeRecordSet(t, set[len(prefix):])
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.offset != w.offset || g.time != w.time || g.value != w.value ||
			(g.key == nil) != (w.key == nil) || (g.key != nil && *g.key != *w.key) ||
			strings.Join(g.headers, ",") != strings.Join(w.headers, ",") {
			t.Errorf("record %d:\n got %+v key %v\nwant %+v key %v", i, g, deref(g.key), w, deref(w.key))
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// The checksum covers the records: a changed byte fails the decoder.
func TestRecordBatchChecksum(t *testing.T) {
	w := &laneWrite{time: time.Now(), msgs: []kafkaOut{{rec: &runtime.Record{Payload: []byte("payload")}}}}
	set := appendRecordSet(nil, []laneSegment{{w: w, idx: []int32{0}}})
	set[len(set)-3] ^= 1
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(set)); err == nil || !strings.Contains(err.Error(), "crc32") {
		t.Errorf("decoding a changed batch: %v, want a crc32 mismatch", err)
	}
}

// varintSize agrees with what binary.AppendVarint writes.
func TestVarintSize(t *testing.T) {
	for _, v := range []int64{0, -1, 1, 63, 64, -64, -65, 8191, 8192, 1 << 20, -(1 << 40), 1<<63 - 1, -1 << 63} {
		if got, want := varintSize(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintSize(%d) = %d, want %d", v, got, want)
		}
	}
}
