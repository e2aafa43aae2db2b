package jsonvalue

import (
	"strings"
	"testing"
)

// JSON text is UTF-8: a string with bytes that are not is refused, in keys
// and values, escaped or not, built or skipped, and in Valid.
func TestDecodeRefusesInvalidUTF8(t *testing.T) {
	bad := []string{
		"\"\xff\"",
		"\"ok \xc3\"",
		"\"\xed\xa0\x80\"", // a UTF-16 surrogate encoded as UTF-8
		"{\"k\xfe\":1}",
		"{\"a\":\"\\n\xe9t\xe9\"}",
		"[\"fine\", \"\xc0\xaf\"]", // overlong '/'
	}
	d := NewDecoder()
	for _, in := range bad {
		if _, err := d.Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), "invalid UTF-8") {
			t.Errorf("Decode(%q) = %v, want an invalid UTF-8 error", in, err)
		}
		if err := d.Valid([]byte(in)); err == nil {
			t.Errorf("Valid(%q) = nil, want an error", in)
		}
	}
	if _, err := d.DecodeFields([]byte("{\"a\":1,\"skip\":\"\xff\"}"), map[string]bool{"a": true}); err == nil {
		t.Error("invalid UTF-8 in a skipped member must still fail")
	}
	good := map[string]string{
		`"été 😀"`:         "été 😀",
		`"\u00e9t\u00e9"`: "été",
		`"a\n€"`:          "a\n€",
	}
	for in, want := range good {
		got, err := d.Decode([]byte(in))
		if err != nil || got != want {
			t.Errorf("Decode(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
}
