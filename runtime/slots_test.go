package runtime

import (
	"reflect"
	"testing"

	"github.com/mqb-dev/mqb/internal/jsonvalue"
)

// TestSlotsAgreeWithMaps: a route decoding into slots gives every program
// the value, presence and error it gets from the payload decoded whole,
// and Value the object DecodeFields builds; a document that is not an
// object decodes whole, and one that is not JSON kills its record.
func TestSlotsAgreeWithMaps(t *testing.T) {
	var progs []*program
	for _, src := range []string{"payload.a", "payload.a.x", "payload.b", "payload.b.y.z"} {
		p, err := compileProgram(src, nil)
		if err != nil {
			t.Fatal(err)
		}
		progs = append(progs, p)
	}
	need, fields := payloadNeeds(progs)
	if !need || fields == nil {
		t.Fatalf("payloadNeeds = %v, %v", need, fields)
	}
	ps := newPayloadSlots(fields, progs)
	docs := []struct {
		in   string
		dead bool
	}{
		{in: `{"a":1,"b":"s","c":[1]}`},
		{in: `{"a":{"x":[true]},"b":{"y":{"z":null}}}`},
		{in: `{"a":null}`},
		{in: `{}`},
		{in: `{"b":{"y":"not an object"}}`},
		{in: `{"a":"text"}`},
		{in: `[1,2]`},
		{in: `"just text"`},
		{in: `{"a":1,"b":}`, dead: true},
		{in: `not json`, dead: true},
	}
	for _, alias := range []bool{false, true} {
		ps.alias = alias
		b := &batch{}
		for _, d := range docs {
			b.recs = append(b.recs, Record{Payload: []byte(d.in)})
		}
		w := &worker{dec: jsonvalue.NewDecoder()}
		ps.decode(w, b)
		slotsAgree(t, b, progs, fields, docs)
	}
}

func slotsAgree(t *testing.T, b *batch, progs []*program, fields map[string]bool, docs []struct {
	in   string
	dead bool
}) {
	t.Helper()
	var ev evaluator
	for i, d := range docs {
		r := &b.recs[i]
		if (r.state == stDead) != d.dead {
			t.Errorf("%s: dead = %v (%s), want %v", d.in, r.state == stDead, r.reason, d.dead)
			continue
		}
		if d.dead {
			continue
		}
		whole, err := jsonvalue.NewDecoder().DecodeFields([]byte(d.in), fields)
		if err != nil {
			t.Fatal(err)
		}
		ref := &Record{value: whole}
		for _, p := range progs {
			v, ok, err := ev.run(p, r)
			wv, wok, werr := ev.run(p, ref)
			if !reflect.DeepEqual(v, wv) || ok != wok || (err == nil) != (werr == nil) {
				t.Errorf("%s: %s = %#v, %v, %v; decoded whole %#v, %v, %v", d.in, p.src, v, ok, err, wv, wok, werr)
			}
		}
		if got := r.Value(); !reflect.DeepEqual(got, whole) {
			t.Errorf("%s: Value = %#v, want %#v", d.in, got, whole)
		}
		// Field answers as the whole object would, from the slots or
		// the value, for a field read, one not read, and a missing one.
		for _, name := range []string{"a", "b", "c", "zz"} {
			m, isObject := whole.(map[string]any)
			v, ok := r.Field(name)
			if ok != isObject || !reflect.DeepEqual(v, m[name]) {
				t.Errorf("%s: Field(%q) = %#v, %v; want %#v, %v", d.in, name, v, ok, m[name], isObject)
			}
		}
		if got := r.payload(); !reflect.DeepEqual(got, whole) || r.slots != nil {
			t.Errorf("%s: payload = %#v (slots left %v), want %#v", d.in, got, r.slots != nil, whole)
		}
	}
}
