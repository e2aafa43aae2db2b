package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// marshalEnvelope is the envelope as encoding/json writes it: what
// appendEnvelope must write, byte for byte (DLQ files written before it
// and after read the same).
func marshalEnvelope(t testing.TB, r *Record) []byte {
	env := struct {
		Error    string            `json:"error"`
		Position uint64            `json:"position"`
		Meta     map[string]string `json:"meta,omitempty"`
		Payload  json.RawMessage   `json:"payload,omitempty"`
		Raw      string            `json:"raw,omitempty"`
		Base64   string            `json:"raw_base64,omitempty"`
	}{Error: r.Meta[metaError], Position: r.Seq, Meta: r.metaView()}
	switch {
	case !utf8.Valid(r.Payload):
		env.Raw, env.Base64 = string(r.Payload), base64.StdEncoding.EncodeToString(r.Payload)
	case json.Valid(r.Payload):
		env.Payload = r.Payload
	default:
		env.Raw = string(r.Payload)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkEnvelope(t *testing.T, r *Record) {
	t.Helper()
	var scratch envelopeScratch
	got := appendEnvelope([]byte("before|"), r, &scratch)
	want := append([]byte("before|"), marshalEnvelope(t, r)...)
	if !bytes.Equal(got, want) {
		t.Errorf("payload %q meta %q id %v %q:\n got %s\nwant %s", r.Payload, r.Meta, r.hasID, r.id, got, want)
	}
}

// TestEnvelopeMatchesMarshal: the hand-written envelope is the one
// encoding/json made, for payloads of every kind a DLQ gets (JSON with
// spaces to drop and characters to escape, text, invalid UTF-8, nothing)
// and metadata held in the map, in the record's pending id, or absent.
func TestEnvelopeMatchesMarshal(t *testing.T) {
	payloads := []string{
		``, `{}`, `null`, `0`, `-1.5e3`, `"s"`, `[1, 2 ,3]`,
		"{\"a\": 1,\n \"b\": [true, false, null], \"c\": {\"d\": \"e f\"}}\n",
		`{"html": "<a href='x'>&amp;</a>", "sep": "` + "\u2028\u2029" + `", "esc": "\"\\\/\b\f\n\r\t\u0001"}`,
		`{"order_id": "o-1", "amount": oops}`, `{"unterminated": "`, `not json at all`, `{"a":1} trailing`,
		"text with \t tab, \x01 control, \x7f del, <b> & \"quotes\" and \\ backslash",
		"line \u2028 separator \u2029 and é ü 日本",
		"\xff\xfe invalid \xc3\x28 utf-8", "{\"a\": \"\xff\"}", "\xe2\x80", "\xe2\x80\xa8",
		"  \r\n  ",
		// Deeper than the engine's validator goes (512), within
		// encoding/json's limit (10,000), and past it.
		strings.Repeat("[", 600) + strings.Repeat("]", 600),
		strings.Repeat(`{"a":`, 600) + "1" + strings.Repeat("}", 600),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 600) + strings.Repeat("]", 599),
		// A lone surrogate escape: JSON to encoding/json, not to the
		// engine's decoder.
		`{"a": "\ud800"}`, `"\udc00 x"`, `["\ud83d\ude00", "\ud83d"]`, `{"a": "\ud800"`,
	}
	metas := []struct {
		name string
		set  func(r *Record)
	}{
		{"none", func(r *Record) {}},
		{"error only", func(r *Record) { r.Meta = map[string]string{metaError: "invalid JSON at byte 30: unexpected 'o'"} }},
		{"many", func(r *Record) {
			r.Meta = map[string]string{metaError: "sink refused <x> & \"y\"\n", "mqb.id": "k-1", "b": "2", "a": "1\u2028",
				"z\x01": "\xff", "": "empty key", "mqb.src.file": "/in/orders.jsonl", "mqb.src.line": "17", "x<y": "&"}
		}},
		{"pending id", func(r *Record) { r.id, r.hasID = "o-17 <&>", true }},
	}
	for _, p := range payloads {
		for _, m := range metas {
			r := &Record{Payload: []byte(p), Seq: 1<<63 + 5}
			m.set(r)
			checkEnvelope(t, r)
		}
	}
}

// FuzzEnvelope holds appendEnvelope to encoding/json on any payload,
// error text and metadata entry.
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte(`{"a": "<b>"}`), "reason", "k", "v", uint64(3), false)
	f.Add([]byte("\xff"), "", "", "", uint64(0), true)
	f.Add([]byte("a\u2028b"), "e\n", "mqb.id", "x", uint64(1), false)
	f.Add([]byte(`{"a": "\ud800"}`), "", "k", "", uint64(2), false)
	f.Fuzz(func(t *testing.T, payload []byte, reason, k, v string, seq uint64, pendingID bool) {
		r := &Record{Payload: payload, Seq: seq}
		if pendingID {
			r.id, r.hasID = v, true
		} else {
			r.Meta = map[string]string{metaError: reason, k: v}
		}
		checkEnvelope(t, r)
	})
}

// BenchmarkDeadLetterLines: the DLQ lines of a batch of malformed
// records, as a DLQ's file sink appends them.
func BenchmarkDeadLetterLines(b *testing.B) {
	recs := make([]*Record, 1024)
	for i := range recs {
		recs[i] = &Record{Seq: uint64(i), Payload: []byte(`{"order_id": "o-1234", "amount": oops1234, "customer": "c-1", "body": "order number 1234"}`),
			Meta: map[string]string{metaError: "invalid JSON at byte 30: unexpected 'o'"}}
	}
	b.Run("appendLines", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = appendLines(buf[:0], recs, true)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding-json", func(b *testing.B) { // what appendLines did before
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf = buf[:0]
			for _, r := range recs {
				buf = append(append(buf, marshalEnvelope(b, r)...), '\n')
			}
		}
		b.SetBytes(int64(len(buf)))
	})
}
