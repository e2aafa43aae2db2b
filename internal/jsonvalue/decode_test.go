package jsonvalue

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in   string
		want any
		err  bool
	}{
		{`{"a":1,"b":"x","c":[true,false,null],"d":{"e":1.5}}`, map[string]any{"a": int64(1), "b": "x", "c": []any{true, false, nil}, "d": map[string]any{"e": 1.5}}, false},
		{` 9007199254740993 `, int64(9007199254740993), false},
		{`-9223372036854775808`, int64(-9223372036854775808), false},
		{`9223372036854775808`, uint64(9223372036854775808), false},
		{`12345678901234567890`, uint64(12345678901234567890), false},
		{`18446744073709551615`, uint64(18446744073709551615), false},
		{`18446744073709551616`, json.Number("18446744073709551616"), false},
		{`-9223372036854775809`, json.Number("-9223372036854775809"), false},
		{`99999999999999999999`, json.Number("99999999999999999999"), false},
		{`1e3`, 1000.0, false},
		{`0.30000000000000004`, 0.30000000000000004, false},
		{`1.2345678901234567`, 1.2345678901234567, false},
		{`1.50`, 1.5, false},
		{`-0.0150e2`, -1.5, false},
		{`12345678901234567.5`, json.Number("12345678901234567.5"), false},
		{`0.1000000000000000000001`, json.Number("0.1000000000000000000001"), false},
		{`1e400`, json.Number("1e400"), false},
		{`"a\"b\\c\u00e9\ud83d\ude00\n"`, "a\"b\\cé😀\n", false},
		{`[]`, []any{}, false},
		{`{}`, map[string]any{}, false},
		{`{"a":1`, nil, true},
		{`{"a":1}x`, nil, true},
		{`01`, nil, true},
		{`1.`, nil, true},
		{`"abc`, nil, true},
		{`{a:1}`, nil, true},
		{`tru`, nil, true},
		{`"\x"`, nil, true},
		{"\"a\tb\"", nil, true},
		{``, nil, true},
		{`[1,]`, nil, true},
	}
	d := NewDecoder()
	for _, tc := range tests {
		got, err := d.Decode([]byte(tc.in))
		if (err != nil) != tc.err {
			t.Errorf("Decode(%s): err = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if verr := d.Valid([]byte(tc.in)); (verr != nil) != tc.err {
			t.Errorf("Valid(%s) = %v", tc.in, verr)
		}
		if !tc.err && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Decode(%s) = %#v, want %#v", tc.in, got, tc.want)
		}
		if tc.err == json.Valid([]byte(tc.in)) && tc.in != "" {
			t.Errorf("%s: disagrees with encoding/json on validity", tc.in)
		}
	}
}

func TestDecodeFields(t *testing.T) {
	d := NewDecoder()
	got, err := d.DecodeFields([]byte(`{"a": 1, "skip": {"x": [1, "y"]}, "b": "s"}`), map[string]bool{"a": true, "b": true})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"a": int64(1), "b": "s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	if _, err := d.DecodeFields([]byte(`{"a": 1, "skip": {"x": [1,]}}`), map[string]bool{"a": true}); err == nil {
		t.Error("an invalid skipped member must still fail validation")
	}
	got, err = d.DecodeFields([]byte(`[1]`), map[string]bool{"a": true})
	if err != nil || !reflect.DeepEqual(got, []any{int64(1)}) {
		t.Errorf("non-object: %#v, %v", got, err)
	}
}

// TestNumbersKeepDigits: ids past 2^53 (and past int64) that differ in
// their last digit decode to different values, and each prints back as
// its literal.
func TestNumbersKeepDigits(t *testing.T) {
	d := NewDecoder()
	seen := map[string]string{}
	for _, lit := range []string{
		"9007199254740993", "9007199254740992",
		"12345678901234567890", "12345678901234567891",
		"123456789012345678901234567890", "123456789012345678901234567891",
		"0.12345678901234567890123", "0.12345678901234567890124",
	} {
		v, err := d.Decode([]byte(lit))
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(v)
		if got != lit {
			t.Errorf("%s decodes to %T %s", lit, v, got)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%s and %s decode to one value", prev, lit)
		}
		seen[got] = lit
	}
}
