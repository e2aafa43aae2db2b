package runtime

import "github.com/mqb-dev/mqb/internal/lazyre"

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
	var scratch envelopeScratch
	for _, r := range recs {
		var err error
		if buf, err = appendLine(buf, r, envelope, &scratch); err != nil {
			r.sinkErr = err.Error()
		}
	}
	return buf
}

// appendLine appends r as one line: its payload, or the DLQ envelope
// (envelope.go).
func appendLine(buf []byte, r *Record, envelope bool, scratch *envelopeScratch) ([]byte, error) {
	if err := encodePayload(r); err != nil {
		return buf, err
	}
	if !envelope {
		buf = append(buf, r.Payload...)
		return append(buf, '\n'), nil
	}
	return append(appendEnvelope(buf, r, scratch), '\n'), nil
}

// snippet is what a source keeps of a record longer than
// max_record_bytes, for the DLQ: its first dlqSnippetBytes.
func snippet(b []byte) []byte {
	if len(b) > dlqSnippetBytes {
		return b[:dlqSnippetBytes]
	}
	return b
}
