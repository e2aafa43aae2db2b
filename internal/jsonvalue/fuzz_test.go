package jsonvalue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// loneSurrogate matches a \u escape of a UTF-16 surrogate, which the
// decoder refuses unless it is half of a pair.
var loneSurrogate = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// FuzzDecode checks the decoder against encoding/json on any input: it
// never panics; what it accepts encoding/json accepts, with the same
// value (numbers compared as the exact numbers they write, keys last
// wins); what encoding/json accepts it accepts too, but for the inputs it
// refuses on purpose (bytes that are not UTF-8, a lone surrogate escape,
// nesting deeper than maxDepth). Valid and DecodeFields agree with Decode.
func FuzzDecode(f *testing.F) {
	for _, doc := range cellDocs {
		f.Add([]byte(doc))
	}
	for _, doc := range []string{`[[[[1]]]]`, `{"a":{"b":[1,2,{"c":null}]}}`, `"\ud83d\ude00"`, `1e400`, `-0.0`, `123456789012345678901234567890`, `1e-400`, `-2.5e-330`, ` 0 `, `"\u0000"`} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder()
		got, err := d.Decode(data)
		if verr := d.Valid(data); (verr == nil) != (err == nil) {
			t.Fatalf("Decode error %v but Valid error %v for %q", err, verr, data)
		}
		if _, ferr := d.DecodeFields(data, map[string]bool{"a": true}); (ferr == nil) != (err == nil) {
			t.Fatalf("Decode error %v but DecodeFields error %v for %q", err, ferr, data)
		}
		if valid, stricter := d.Check(data); valid != (err == nil) || stricter != (err != nil && stricterThanJSON(err)) {
			t.Fatalf("Decode error %v but Check says valid %v, stricter %v for %q", err, valid, stricter, data)
		}
		var want any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		werr := dec.Decode(&want)
		if werr == nil && dec.More() {
			werr = fmt.Errorf("more after the value")
		}
		if werr == nil {
			// Decoder.Decode stops after the value; trailing text other
			// than white space makes the document invalid.
			werr = checkTrailing(data, dec)
		}
		switch {
		case err == nil && werr != nil:
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, werr)
		case err != nil && werr == nil:
			msg := err.Error()
			refused := (!utf8.Valid(data) && strings.Contains(msg, "invalid UTF-8")) ||
				(loneSurrogate.Match(data) && strings.Contains(msg, "lone UTF-16 surrogate")) ||
				strings.Contains(msg, "nest")
			if !refused {
				t.Fatalf("refused %q, which encoding/json accepts: %v", data, err)
			}
		case err == nil:
			if why := sameValue(got, want); why != "" {
				t.Fatalf("%q: decoded %#v, encoding/json %#v: %s", data, got, want, why)
			}
		}
	})
}

// stricterThanJSON reports whether err refuses a document by a rule of
// this package's that JSON does not have (Decoder.stricter).
func stricterThanJSON(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "nesting deeper") || strings.Contains(msg, "lone UTF-16 surrogate") || strings.Contains(msg, "invalid UTF-8")
}

// checkTrailing reports text after the value dec read that is not white
// space.
func checkTrailing(data []byte, dec *json.Decoder) error {
	rest := data[dec.InputOffset():]
	if len(bytes.TrimLeft(rest, " \t\r\n")) > 0 {
		return fmt.Errorf("text after the value")
	}
	return nil
}

// sameValue compares a decoded value with encoding/json's (UseNumber),
// returning why they differ ("" when they do not).
func sameValue(got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("object %#v vs %#v", got, want)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return "missing key " + strconv.Quote(k)
			}
			if why := sameValue(gv, wv); why != "" {
				return k + ": " + why
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("array %#v vs %#v", got, want)
		}
		for i := range w {
			if why := sameValue(g[i], w[i]); why != "" {
				return fmt.Sprintf("[%d]: %s", i, why)
			}
		}
		return ""
	case json.Number:
		wr, ok := new(big.Rat).SetString(string(w))
		if !ok {
			// An exponent too large for big.Rat: zero if the mantissa
			// is, else no float holds it and the literal is the value.
			mant, _, _ := strings.Cut(strings.ToLower(string(w)), "e")
			if got == any(0.0) && strings.Trim(mant, "-0.") == "" {
				return ""
			}
			if g, isNum := got.(json.Number); !isNum || g != w {
				return fmt.Sprintf("number %s decoded as %#v", w, got)
			}
			return ""
		}
		var lit string
		switch g := got.(type) {
		case int64:
			lit = strconv.FormatInt(g, 10)
		case uint64:
			lit = strconv.FormatUint(g, 10)
		case float64:
			lit = strconv.FormatFloat(g, 'g', -1, 64)
		case json.Number:
			lit = string(g)
		default:
			return fmt.Sprintf("number %s decoded as %T", w, got)
		}
		gr, ok := new(big.Rat).SetString(lit)
		if !ok || gr.Cmp(wr) != 0 {
			return fmt.Sprintf("number %s decoded as %s", w, lit)
		}
		return ""
	default:
		if got != want {
			return fmt.Sprintf("%#v vs %#v", got, want)
		}
		return ""
	}
}
