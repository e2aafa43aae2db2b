package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// TestDLQEnvelope: a dead letter keeps the record it holds: a JSON
// record as payload, any other line as raw, and a record whose bytes are
// not UTF-8 (which a JSON string cannot hold) as raw_base64 too, byte for
// byte, beside a readable raw.
func TestDLQEnvelope(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		payload  bool // kept as payload
		base64   bool // kept as raw_base64
	}{
		{"json", `{"a":1,"b":"é"}`, true, false},
		{"not json", `{not json`, false, false},
		{"json with a byte that is not UTF-8", "{\"a\":\"c\xff\"}", false, true},
		{"text that is not UTF-8", "caf\xe9 \x00\xfe", false, true},
		{"half a rune at the end", "abc\xe2\x82", false, true},
	} {
		r := &Record{Seq: 7, Payload: []byte(tc.in), Meta: map[string]string{metaError: "why"}}
		out := AppendLines(nil, []*Record{r}, true)
		if bytes.Count(out, []byte("\n")) != 1 {
			t.Fatalf("%s: %q is not one line", tc.name, out)
		}
		var env struct {
			Error    string          `json:"error"`
			Position uint64          `json:"position"`
			Payload  json.RawMessage `json:"payload"`
			Raw      *string         `json:"raw"`
			Base64   *string         `json:"raw_base64"`
		}
		if err := json.Unmarshal(out, &env); err != nil {
			t.Fatalf("%s: %q: %v", tc.name, out, err)
		}
		if env.Error != "why" || env.Position != 7 {
			t.Errorf("%s: error %q position %d", tc.name, env.Error, env.Position)
		}
		switch {
		case tc.payload:
			if string(env.Payload) != tc.in || env.Raw != nil || env.Base64 != nil {
				t.Errorf("%s: %s, want the payload as it is", tc.name, out)
			}
		case tc.base64:
			if env.Base64 == nil || env.Raw == nil || env.Payload != nil {
				t.Fatalf("%s: %s, want raw and raw_base64", tc.name, out)
			}
			if got, err := base64.StdEncoding.DecodeString(*env.Base64); err != nil || string(got) != tc.in {
				t.Errorf("%s: raw_base64 decodes to %q (%v), want %q", tc.name, got, err, tc.in)
			}
		default:
			if env.Raw == nil || *env.Raw != tc.in || env.Payload != nil || env.Base64 != nil {
				t.Errorf("%s: %s, want the line as raw", tc.name, out)
			}
		}
	}
}
