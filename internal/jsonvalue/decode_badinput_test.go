package jsonvalue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// A \u escape of a UTF-16 surrogate not in a pair is refused, in Decode,
// Valid and DecodeFields alike: it has no UTF-8 form, and decoding it to
// U+FFFD (as encoding/json does) would make two ids that differ there
// one value. A pair decodes to its rune.
func TestDecodeRefusesLoneSurrogates(t *testing.T) {
	bad := map[string]int{ // document → offset of the escape refused
		`"\ud800"`:          1,
		`"ab\udfff"`:        3,
		`"\ud83d\u0041"`:    1, // a high surrogate, then no low one
		`"\ude00\ud83d"`:    1, // the pair's halves in the wrong order
		`{"k\udc00":1}`:     3,
		`["ok", "x\ud800"]`: 9,
	}
	d := NewDecoder()
	for in, at := range bad {
		_, err := d.Decode([]byte(in))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != at || !strings.Contains(err.Error(), "lone UTF-16 surrogate") {
			t.Errorf("Decode(%s) = %v, want a lone surrogate error at byte %d", in, err, at)
		}
		if err := d.Valid([]byte(in)); err == nil {
			t.Errorf("Valid(%s) = nil, want an error", in)
		}
	}
	if _, err := d.DecodeFields([]byte(`{"a":1,"skip":"\udbff"}`), map[string]bool{"a": true}); err == nil {
		t.Error("a lone surrogate in a skipped member must still fail")
	}
	if got, err := d.Decode([]byte(`"\ud83d\ude00\u00e9"`)); err != nil || got != "😀é" {
		t.Errorf("a surrogate pair: %q, %v", got, err)
	}
}

// Two literals decode to one value only when they write one number: a
// subnormal float holds fewer digits than DBL_DIG (4.9e-324 parses to the
// float printed 5e-324), and a literal too small for any float parses to
// zero; both stay literals (json.Number), as a literal with more digits
// than a float holds does.
func TestDecodeKeepsNumbersApart(t *testing.T) {
	d := NewDecoder()
	for in, want := range map[string]any{
		`4.9e-324`:   json.Number("4.9e-324"),
		`5e-324`:     5e-324,
		`1e-400`:     json.Number("1e-400"),
		`-2.5e-330`:  json.Number("-2.5e-330"),
		`2.5e-308`:   2.5e-308,
		`0.0e5`:      0.0,
		`-0.000`:     math.Copysign(0, -1),
		`0E99999999`: 0.0,
	} {
		got, err := d.Decode([]byte(in))
		if err != nil || fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", want, want) {
			t.Errorf("Decode(%s) = %T %v, %v; want %T %v", in, got, got, err, want, want)
		}
	}
}

// TestUnexpectedMsg: the message built without fmt is the one fmt built,
// for every byte.
func TestUnexpectedMsg(t *testing.T) {
	for c := range 256 {
		for _, rest := range []string{"", " after the value"} {
			if got, want := unexpectedMsg(byte(c), rest), fmt.Sprintf("unexpected %q"+rest, byte(c)); got != want {
				t.Errorf("byte %#x: %q, want %q", c, got, want)
			}
		}
	}
}
