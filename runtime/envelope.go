package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mqb-dev/mqb/internal/jsonquote"
	"github.com/mqb-dev/mqb/internal/jsonvalue"
)

// The DLQ envelope: the line a DLQ's line sink writes for a dead record.
// It is the JSON encoding/json makes of
//
//	struct {
//		Error    string            `json:"error"`
//		Position uint64            `json:"position"`
//		Meta     map[string]string `json:"meta,omitempty"`
//		Payload  json.RawMessage   `json:"payload,omitempty"`
//		Raw      string            `json:"raw,omitempty"`
//		Base64   string            `json:"raw_base64,omitempty"`
//	}
//
// byte for byte (TestEnvelopeMatchesMarshal, FuzzEnvelope), appended
// without reflection or a map per record: under a storm of bad records
// encoding/json took half of a route's CPU, its garbage a tenth more.

// envelopeScratch is what appending envelopes reuses from record to
// record.
type envelopeScratch struct {
	compact bytes.Buffer       // a payload compacted
	dec     *jsonvalue.Decoder // made on first use
}

// jsonValid is json.Valid(b), by the engine's own validator, which
// stops at the first fault without encoding/json's scanner or its error
// text; a document it refuses by a rule stricter than JSON's (nesting
// past 512 levels, a lone surrogate escape) is left to encoding/json.
func (s *envelopeScratch) jsonValid(b []byte) bool {
	if s.dec == nil {
		s.dec = jsonvalue.NewDecoder()
	}
	valid, stricter := s.dec.Check(b)
	return valid || stricter && json.Valid(b)
}

// appendEnvelope appends r's envelope, without the newline.
func appendEnvelope(buf []byte, r *Record, scratch *envelopeScratch) []byte {
	buf = append(buf, `{"error":`...)
	buf = jsonquote.Append(buf, r.Meta[metaError])
	buf = append(buf, `,"position":`...)
	buf = strconv.AppendUint(buf, r.Seq, 10)
	buf = appendEnvelopeMeta(buf, r)
	switch {
	case !utf8.Valid(r.Payload):
		// A JSON string cannot hold these bytes (encoding/json writes
		// U+FFFD for each one): raw is for reading, raw_base64 the
		// record as it came, to replay.
		buf = append(buf, `,"raw":`...)
		buf = jsonquote.Append(buf, r.Payload)
		buf = append(buf, `,"raw_base64":"`...)
		buf = base64.StdEncoding.AppendEncode(buf, r.Payload)
		buf = append(buf, '"')
	default:
		// A payload that is not JSON is kept as text; JSON is compacted
		// and escaped as json.Marshal does a RawMessage (<, >, &, U+2028
		// and U+2029).
		if scratch.jsonValid(r.Payload) {
			scratch.compact.Reset()
			if err := json.Compact(&scratch.compact, r.Payload); err == nil {
				out := bytes.NewBuffer(append(buf, `,"payload":`...))
				json.HTMLEscape(out, scratch.compact.Bytes())
				return append(out.Bytes(), '}')
			}
		}
		if len(r.Payload) > 0 {
			buf = append(buf, `,"raw":`...)
			buf = jsonquote.Append(buf, r.Payload)
		}
	}
	return append(buf, '}')
}

// appendEnvelopeMeta appends the envelope's meta member (metaView), its
// keys in byte order, or nothing when the record has no metadata.
func appendEnvelopeMeta(buf []byte, r *Record) []byte {
	if r.hasID {
		buf = append(buf, `,"meta":{`...)
		buf = jsonquote.Append(buf, metaID)
		buf = append(buf, ':')
		buf = jsonquote.Append(buf, r.id)
		return append(buf, '}')
	}
	if len(r.Meta) == 0 {
		return buf
	}
	var small [8]string
	keys := small[:0]
	for k := range r.Meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, `,"meta":{`...)
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = jsonquote.Append(buf, k)
		buf = append(buf, ':')
		buf = jsonquote.Append(buf, r.Meta[k])
	}
	return append(buf, '}')
}
