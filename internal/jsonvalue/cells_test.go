package jsonvalue

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// cellDocs are documents for DecodeSlotsIn: escapes, unicode, numbers at
// the edges of int64, uint64 and float64, nesting, and malformed ones.
var cellDocs = []string{
	`{"a": 1, "skip": {"x": [1, "y"]}, "b": "s"}`,
	` {"c":null,"a":[true,{"d":1.5, "e":"nested"}]} `,
	`{}`,
	`{"a":1,"a":2}`,
	`{"a":"first","a":"second"}`,
	`{"b":"x\u00e9\n","z":9007199254740993}`,
	`{"b":"\ud83d\ude00 \"quoted\" back\\slash \/ \b\f\r\t","a":""}`,
	`{"b":"\ud800 lone surrogate","a":"\u0000"}`,
	`{"a":"été 😀 日本","b":"plain ascii"}`,
	`{"\u0062":1,"ab":2}`,
	`{"a":9223372036854775807,"b":-9223372036854775808,"c":255}`,
	`{"a":9223372036854775808,"b":18446744073709551615,"c":18446744073709551616}`,
	`{"a":-9223372036854775809,"b":0,"c":-0}`,
	`{"a":256,"b":-1,"c":-256}`,
	`{"a":1.5,"b":-0.0,"c":1e308}`,
	`{"a":1e309,"b":0.30000000000000004,"c":0.1000000000000000055511151231257827}`,
	`{"a":4.9e-324,"b":1E+2,"c":-2.5e-3}`,
	`{"a":true,"b":false,"c":null}`,
	`{"a":1,"skip":{"x":[1,]}}`,
	`{"a":1`,
	`{"a":1}x`,
	`{"a":1,}`,
	`{a:1}`,
	`{"a":"unterminated}`,
	`{"a":"bad \x escape"}`,
	`{"a":"bad \u12 escape"}`,
	"{\"a\":\"tab\there\"}",
	"{\"a\":1,\"skip\":\"\xff\"}",
	"{\"b\":\"\xff\"}",
	"{\"b\":\"\\n\xe9t\xe9\"}",
	`{"a":01}`,
	`{"a":1.}`,
	`{"a":-}`,
	`{"a":1e}`,
	`{"a":tru}`,
	`[1]`,
	`"a"`,
	`[1,]`,
	``,
}

// TestDecodeSlotsInAgrees: with Cells, DecodeSlotsIn stores what
// DecodeSlots stores (the same values, types, absences and errors,
// with the same message), for every document.
func TestDecodeSlotsInAgrees(t *testing.T) {
	type absent struct{}
	index := map[string]int{"a": 0, "b": 1, "c": 2}
	plain, celled := NewDecoder(), NewDecoder()
	var cells Cells
	for _, in := range cellDocs {
		cells.Reset(3)
		want := []any{absent{}, absent{}, absent{}}
		got := []any{absent{}, absent{}, absent{}}
		wobj, werr := plain.DecodeSlots([]byte(in), index, want)
		gobj, gerr := celled.DecodeSlotsIn([]byte(in), index, got, &cells)
		if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
			t.Errorf("%s: err = %v, want %v", in, gerr, werr)
			continue
		}
		if werr != nil {
			continue
		}
		if gobj != wobj {
			t.Errorf("%s: obj = %v, want %v", in, gobj, wobj)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: slots = %#v, want %#v", in, got, want)
		}
	}
}

// TestDecodeSlotsInAliases: a string without escapes is the document's
// own bytes, one with escapes a copy; and values stay what they were
// while later documents are decoded into the same Cells (until Reset).
func TestDecodeSlotsInAliases(t *testing.T) {
	index := map[string]int{"a": 0, "b": 1}
	d := NewDecoder()
	var cells Cells
	cells.Reset(2) // room for one document: the next ones grow the cells
	doc := []byte(`{"a":"plain","b":"esc\u00e9"}`)
	var kept [][]any
	for i := range 20 {
		slots := make([]any, 2)
		in := doc
		if i > 0 {
			in = []byte(strings.Replace(string(doc), "plain", strings.Repeat("p", i), 1))
		}
		if _, err := d.DecodeSlotsIn(in, index, slots, &cells); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			a := slots[0].(string)
			if unsafe.StringData(a) != &in[6] {
				t.Error("a string without escapes was copied")
			}
			b := slots[1].(string)
			if b != "escé" || uintptr(unsafe.Pointer(unsafe.StringData(b)))-uintptr(unsafe.Pointer(&in[0])) < uintptr(len(in)) {
				t.Errorf("escaped string %q aliases the document", b)
			}
		}
		kept = append(kept, slots)
	}
	for i, slots := range kept {
		want := "plain"
		if i > 0 {
			want = strings.Repeat("p", i)
		}
		if slots[0] != want || slots[1] != "escé" {
			t.Errorf("document %d: slots became %q", i, slots)
		}
	}
}

// TestDecodeSlotsInNumbers: numbers boxed in Cells keep their type and
// value, each its own box.
func TestDecodeSlotsInNumbers(t *testing.T) {
	index := map[string]int{"a": 0, "b": 1, "c": 2}
	d := NewDecoder()
	var cells Cells
	cells.Reset(3)
	slots := make([]any, 3)
	if _, err := d.DecodeSlotsIn([]byte(`{"a":-9223372036854775808,"b":1.25,"c":[7000,-7000,"x"]}`), index, slots, &cells); err != nil {
		t.Fatal(err)
	}
	want := []any{int64(math.MinInt64), 1.25, []any{int64(7000), int64(-7000), "x"}}
	if !reflect.DeepEqual(slots, want) {
		t.Errorf("slots = %#v, want %#v", slots, want)
	}
	if b, err := json.Marshal(slots); err != nil || string(b) != `[-9223372036854775808,1.25,[7000,-7000,"x"]]` {
		t.Errorf("marshalled %s, %v", b, err)
	}
}

// TestDecodeSlotsInAllocs: with Cells, decoding strings and numbers into
// slots allocates nothing.
func TestDecodeSlotsInAllocs(t *testing.T) {
	index := map[string]int{"order_id": 0, "amount": 1, "body": 2, "price": 3}
	doc := []byte(`{"order_id": "o-123456", "amount": 123456, "customer": "c-1", "body": "order number 123456", "price": 12.5}`)
	d := NewDecoder()
	var cells Cells
	slots := make([]any, 4)
	allocs := testing.AllocsPerRun(100, func() {
		cells.Reset(4)
		if _, err := d.DecodeSlotsIn(doc, index, slots, &cells); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations a document, want 0", allocs)
	}
}

func BenchmarkDecodeSlotsIn(b *testing.B) {
	index := map[string]int{"order_id": 0, "amount": 1, "body": 2}
	doc := []byte(`{"order_id": "o-123456", "amount": 123456, "customer": "c-1", "body": "order number 123456"}`)
	for _, withCells := range []bool{false, true} {
		name := "boxed"
		if withCells {
			name = "cells"
		}
		b.Run(name, func(b *testing.B) {
			d := NewDecoder()
			var cells Cells
			slots := make([]any, 3)
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for i := 0; b.Loop(); i++ {
				var c *Cells
				if withCells {
					if i%1024 == 0 {
						cells.Reset(3 * 1024)
					}
					c = &cells
				}
				if _, err := d.DecodeSlotsIn(doc, index, slots, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStringsEveryOffset: with a quote, an escape, a control character
// or a non-ASCII byte at every offset of strings of every length up to
// 40, Decode, with and without Cells, agrees with encoding/json on what
// the string holds, and refuses what is not valid JSON text.
func TestStringsEveryOffset(t *testing.T) {
	specials := []string{`\"`, `\\`, `\n`, `\u00e9`, `\ud83d\ude00`, "é", "😀", "\x7f", "\x01", "\t", "\xff", "\xc3", `"`, `\`, `\x`}
	d := NewDecoder()
	var cells Cells
	index := map[string]int{"a": 0}
	for n := 0; n <= 40; n++ {
		for at := 0; at <= n; at++ {
			for _, sp := range specials {
				text := strings.Repeat("x", at) + sp + strings.Repeat("y", n-at)
				doc := `{"a":"` + text + `"}`
				var want map[string]string
				jerr := json.Unmarshal([]byte(doc), &want)
				valid := jerr == nil && utf8Valid(text)
				got, err := d.Decode([]byte(doc))
				if (err == nil) != valid {
					t.Fatalf("Decode(%q) = %v, want valid %v (encoding/json: %v)", doc, err, valid, jerr)
				}
				cells.Reset(1)
				slots := make([]any, 1)
				_, cerr := d.DecodeSlotsIn([]byte(doc), index, slots, &cells)
				if (cerr == nil) != valid {
					t.Fatalf("DecodeSlotsIn(%q) = %v, want valid %v", doc, cerr, valid)
				}
				if !valid {
					continue
				}
				if g := got.(map[string]any)["a"]; g != want["a"] || slots[0] != want["a"] {
					t.Fatalf("%q: Decode %q, DecodeSlotsIn %q, want %q", doc, g, slots[0], want["a"])
				}
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }
