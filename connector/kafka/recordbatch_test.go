package kafka

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

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

// testOut is a record to produce with payload, key (none when nil) and
// headers from meta ("k=v"), encoded as build encodes them.
func testOut(arena *[]byte, payload string, key *string, headers ...string) kafkaOut {
	var m kafkaOut
	rec := &runtime.Record{Payload: []byte(payload)}
	if key != nil {
		m.start(arena, rec, *key, true)
	} else {
		m.start(arena, rec, "", false)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, "=")
		m.addHeader(arena, k, v)
	}
	return m
}

// A request's record set, over segments of two writes, reads back with
// every record in order: offsets counted from 0, each write's time, keys
// (none, empty, long), values (empty, long enough for two-byte lengths)
// and headers (the message id first, then those from meta, an empty one
// among them), however the arena grew while the records were built.
func TestRecordBatchReadsBack(t *testing.T) {
	long := strings.Repeat("v", 300)
	t0 := time.UnixMilli(1_700_000_000_000)
	k1, empty := "k1", ""
	var arena []byte // grows, moving, while records are built
	w1 := &laneWrite{time: t0, msgs: []kafkaOut{
		testOut(&arena, `{"a":1}`, nil),
		testOut(&arena, long, &k1, "trace=t-1", "empty="),
		testOut(&arena, "", &empty),
	}}
	w2 := &laneWrite{time: t0.Add(250 * time.Millisecond), msgs: []kafkaOut{
		testOut(&arena, "second", &long),
	}}
	id := func(w *laneWrite, i int) string {
		return runtime.HeaderMessageID + "=" + w.msgs[i].rec.MessageUUID().String()
	}
	segs := []laneSegment{{w: w1, idx: []int32{0, 2}}, {w: w2, idx: []int32{0}}, {w: w1, idx: []int32{1}}}
	want := []decodedRecord{
		{offset: 0, time: t0.UnixMilli(), value: `{"a":1}`, headers: []string{id(w1, 0)}},
		{offset: 1, time: t0.UnixMilli(), key: &empty, value: "", headers: []string{id(w1, 2)}},
		{offset: 2, time: t0.UnixMilli() + 250, key: &long, value: "second", headers: []string{id(w2, 0)}},
		{offset: 3, time: t0.UnixMilli(), key: &k1, value: long, headers: []string{id(w1, 1), "trace=t-1", "empty="}},
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

// The size build gives a record bounds what it adds to a record batch.
func TestRecordSizeBound(t *testing.T) {
	long := strings.Repeat("m", 200)
	for _, tc := range []struct {
		name    string
		payload string
		meta    map[string]string
	}{
		{"bare", "{}", nil},
		{"empty", "", nil},
		{"meta headers", strings.Repeat("p", 1000), map[string]string{"a": "1", "b": long, long: ""}},
	} {
		var m kafkaOut
		var arena []byte
		rec := &runtime.Record{Payload: []byte(tc.payload), Meta: tc.meta}
		if err := (&kafkaSink{}).build(rec, &m, &arena); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := &laneWrite{time: time.Now(), msgs: []kafkaOut{m}}
		set := appendRecordSet(nil, []laneSegment{{w: w, idx: []int32{0}}})
		if got := len(set) - 4 - batchHeaderSize; got > int(m.size) {
			t.Errorf("%s: record takes %d bytes, size says at most %d", tc.name, got, m.size)
		}
		if got := len(decodeRecordSet(t, set)[0].headers); got != 1+len(tc.meta) {
			t.Errorf("%s: %d headers, want %d", tc.name, got, 1+len(tc.meta))
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
	var arena []byte
	w := &laneWrite{time: time.Now(), msgs: []kafkaOut{testOut(&arena, "payload", nil)}}
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
