package jsonvalue

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeSlots: DecodeSlots agrees with DecodeFields on every document
// — the same validity, the same value for each field read, the same
// absence — and says when a document is not an object.
func TestDecodeSlots(t *testing.T) {
	type absent struct{}
	index := map[string]int{"a": 0, "b": 1, "c": 2}
	tests := []struct {
		in   string
		obj  bool
		want []any // nil: an error
	}{
		{`{"a": 1, "skip": {"x": [1, "y"]}, "b": "s"}`, true, []any{int64(1), "s", absent{}}},
		{` {"c":null,"a":[true,{"d":1.5}]} `, true, []any{[]any{true, map[string]any{"d": 1.5}}, absent{}, nil}},
		{`{}`, true, []any{absent{}, absent{}, absent{}}},
		{`{"a":1,"a":2}`, true, []any{int64(2), absent{}, absent{}}},
		{`{"b":"x\u00e9\n","z":9007199254740993}`, true, []any{absent{}, "xé\n", absent{}}},
		{`{"\u0062":1,"ab":2}`, true, []any{absent{}, int64(1), absent{}}},
		{`{"a":1,"skip":{"x":[1,]}}`, true, nil},
		{`{"a":1`, true, nil},
		{`{"a":1}x`, true, nil},
		{`{"a":1,}`, true, nil},
		{`{a:1}`, true, nil},
		{"{\"a\":1,\"skip\":\"\xff\"}", true, nil},
		{"{\"b\":\"\xff\"}", true, nil},
		{`[1]`, false, []any{absent{}, absent{}, absent{}}},
		{`"a"`, false, []any{absent{}, absent{}, absent{}}},
		{`[1,]`, false, nil},
		{``, false, nil},
	}
	d := NewDecoder()
	fields := map[string]bool{"a": true, "b": true, "c": true}
	for _, tc := range tests {
		slots := []any{absent{}, absent{}, absent{}}
		obj, err := d.DecodeSlots([]byte(tc.in), index, slots)
		if (err != nil) != (tc.want == nil) {
			t.Errorf("DecodeSlots(%s): err = %v, want error %v", tc.in, err, tc.want == nil)
			continue
		}
		if _, ferr := d.DecodeFields([]byte(tc.in), fields); (ferr != nil) != (err != nil) {
			t.Errorf("DecodeSlots(%s) = %v but DecodeFields = %v", tc.in, err, ferr)
		}
		if err != nil {
			continue
		}
		if obj != tc.obj {
			t.Errorf("DecodeSlots(%s): obj = %v, want %v", tc.in, obj, tc.obj)
		}
		if !reflect.DeepEqual(slots, tc.want) {
			t.Errorf("DecodeSlots(%s) = %#v, want %#v", tc.in, slots, tc.want)
		}
	}
}

// TestDecodeSlotsIndexes: one Decoder given several slot indexes in turn,
// small ones (looked up in a list it keeps) and one too large for the
// list (looked up in the map), finds each index's own slots.
func TestDecodeSlotsIndexes(t *testing.T) {
	doc := []byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10}`)
	large := map[string]int{}
	for i, k := range []string{"j", "i", "h", "g", "f", "e", "d", "c", "b", "a"} {
		large[k] = i
	}
	indexes := []map[string]int{{"a": 0, "c": 1}, {"c": 0, "a": 1}, large, {"j": 0}, {"a": 0, "c": 1}}
	d := NewDecoder()
	for round := range 2 {
		for _, index := range indexes {
			slots := make([]any, len(index))
			if _, err := d.DecodeSlots(doc, index, slots); err != nil {
				t.Fatal(err)
			}
			want := make([]any, len(index))
			for k, i := range index {
				want[i] = int64(k[0]-'a') + 1
			}
			if !reflect.DeepEqual(slots, want) {
				t.Errorf("round %d, index %v: slots %v, want %v", round, index, slots, want)
			}
		}
	}
}

// TestDecodeSlotsReuse: a decoder used for slots decodes whole documents
// as before afterwards (the build and depth state is put back).
func TestDecodeSlotsReuse(t *testing.T) {
	d := NewDecoder()
	slots := make([]any, 1)
	if _, err := d.DecodeSlots([]byte(`{"a":{"b":[1,`), map[string]int{"a": 0}, slots); err == nil {
		t.Fatal("a cut document must fail")
	}
	got, err := d.Decode([]byte(`{"x":{"y":[1]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"x": map[string]any{"y": []any{int64(1)}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Decode after DecodeSlots = %#v, want %#v", got, want)
	}
}

// BenchmarkDecodeSlots decodes order lines into the three slots a route
// writing id, amount and body reads, skipping the fourth member.
func BenchmarkDecodeSlots(b *testing.B) {
	line := []byte(`{"order_id": "o-123456", "amount": 123456, "customer": "c-345", "body": "order number 123456"}`)
	index := map[string]int{"order_id": 0, "amount": 1, "body": 2}
	slots := make([]any, 3)
	d := NewDecoder()
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := d.DecodeSlots(line, index, slots); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeSlotsSeenKeys: a Decoder compares each member's key with the
// key it saw at that place in the documents before (slotKeys.seen). Over
// a run of documents whose keys change order, share prefixes ("order",
// "order_id"), are escaped forms of a read key, too long to remember, or
// invalid, every document decodes as DecodeFields does it on a fresh
// Decoder: the same error or none, the same value in each slot.
func TestDecodeSlotsSeenKeys(t *testing.T) {
	type absent struct{}
	keys := []string{`"a"`, `"ab"`, `"b"`, `"order_id"`, `"order"`, `"order_id2"`, `"\u0061"`, `"b\"c"`,
		`"é"`, `"` + strings.Repeat("k", 70) + `"`, "\"a\xff\"", "\"a\x01\"", `"a`}
	index := map[string]int{"a": 0, "order_id": 1, "é": 2, strings.Repeat("k", 70): 3, `b"c`: 4}
	fields := map[string]bool{}
	for k := range index {
		fields[k] = true
	}
	r := rand.New(rand.NewPCG(3, 4))
	d := NewDecoder()
	for n := range 20000 {
		var doc strings.Builder
		doc.WriteByte('{')
		members := r.IntN(6)
		for i := range members {
			if i > 0 {
				doc.WriteString(", ")
			}
			k := keys[r.IntN(len(keys))]
			if r.IntN(10) > 0 && n > 0 {
				k = keys[(n+i)%4] // mostly the same keys at the same places
			}
			fmt.Fprintf(&doc, `%s: %d`, k, r.IntN(100))
		}
		doc.WriteByte('}')
		data := []byte(doc.String())
		slots := []any{absent{}, absent{}, absent{}, absent{}, absent{}}
		_, err := d.DecodeSlots(data, index, slots)
		ref, rerr := NewDecoder().DecodeFields(data, fields)
		if (err != nil) != (rerr != nil) {
			t.Fatalf("document %d %s: DecodeSlots error %v, DecodeFields %v", n, data, err, rerr)
		}
		if err != nil {
			continue
		}
		for k, i := range index {
			want, ok := ref.(map[string]any)[k]
			if !ok {
				want = absent{}
			}
			if !reflect.DeepEqual(slots[i], want) {
				t.Fatalf("document %d %s: slot %q = %#v, want %#v", n, data, k, slots[i], want)
			}
		}
	}
}

// TestDecodeSlotsSeenKeysGap: a place no key was remembered at (its key
// had an escape) is not the empty key: a later document's "" key there
// goes to its slot.
func TestDecodeSlotsSeenKeysGap(t *testing.T) {
	index := map[string]int{"": 0, "b": 1}
	d := NewDecoder()
	slots := make([]any, 2)
	if _, err := d.DecodeSlots([]byte(`{"\u0061":1,"b":2}`), index, slots); err != nil {
		t.Fatal(err)
	}
	slots = []any{nil, nil}
	if _, err := d.DecodeSlots([]byte(`{"":7,"b":8}`), index, slots); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(slots, []any{int64(7), int64(8)}) {
		t.Errorf("slots %v, want [7 8]", slots)
	}
}
