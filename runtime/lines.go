package runtime

import (
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"

	"github.com/mqb-dev/mqb/internal/lazyre"
)

// Records written as lines, by the sinks that write lines (a file, the
// process's standard output): each record's payload, or, for a DLQ's
// target, the envelope that says why the record is there.

// maxBatchBytes closes a batch early once its payloads reach this size, so a
// batch of long lines stays bounded whatever batch_size says.
const maxBatchBytes = 8 << 20

// dlqSnippetBytes is how much of an over-long line is kept for the DLQ.
const dlqSnippetBytes = 1024

// unsafeName matches the runs of characters SafeName replaces.
var unsafeName = lazyre.New(`[^A-Za-z0-9_.-]+`)

// appendLines appends recs as lines; a record that cannot be encoded gets
// the reason in its sinkErr and no line.
func appendLines(buf []byte, recs []*Record, envelope bool) []byte {
	for _, r := range recs {
		var err error
		if buf, err = appendLine(buf, r, envelope); err != nil {
			r.sinkErr = err.Error()
		}
	}
	return buf
}

// appendLine appends r as one line: its payload, or the DLQ envelope.
func appendLine(buf []byte, r *Record, envelope bool) ([]byte, error) {
	if err := encodePayload(r); err != nil {
		return buf, err
	}
	if !envelope {
		buf = append(buf, r.Payload...)
		return append(buf, '\n'), nil
	}
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
		// A JSON string cannot hold these bytes (encoding/json writes
		// U+FFFD for each one): raw is for reading, raw_base64 the
		// record as it came, to replay.
		env.Raw, env.Base64 = string(r.Payload), base64.StdEncoding.EncodeToString(r.Payload)
	case json.Valid(r.Payload):
		env.Payload = r.Payload
	default:
		env.Raw = string(r.Payload)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return buf, err
	}
	buf = append(buf, b...)
	return append(buf, '\n'), nil
}

// snippet is what a source keeps of a record longer than
// max_record_bytes, for the DLQ: its first dlqSnippetBytes.
func snippet(b []byte) []byte {
	if len(b) > dlqSnippetBytes {
		return b[:dlqSnippetBytes]
	}
	return b
}
