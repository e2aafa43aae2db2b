package runtime

import (
	"sort"

	"github.com/mqb-dev/mqb/internal/jsonvalue"
)

// A route whose every expression reads the payload through a plain field
// path (payload.a, payload.a.b) decodes each JSON object into slots: the
// values of the top-level fields it reads, in a slice indexed by field,
// cut from one allocation per batch. No map is built per record; a
// program reads its field's slot directly (evaluator.run). Anything that
// wants the payload as a value (Record.Value, a program without a slot)
// gets the map those fields would have made.

// payloadSlots numbers the top-level fields a route reads.
type payloadSlots struct {
	names []string       // by slot
	index map[string]int // name → slot
	// alias: values are decoded into the batch's cells, their strings
	// aliasing its arena (jsonvalue.Cells), with no allocation of their
	// own. Only for a route that reuses a batch once nothing holds its
	// records nor any value read from them (route.linesPassThrough).
	alias bool
}

// absentField fills the slot of a field the record does not have (a
// JSON null is nil): it tells the two apart, as the map would by the
// key's absence. Being zero-sized, boxing it allocates nothing.
type absentField struct{}

// newPayloadSlots numbers fields (sorted, so the numbering is stable) and
// gives each program reading one of them its slot.
func newPayloadSlots(fields map[string]bool, progs []*program) *payloadSlots {
	ps := &payloadSlots{index: make(map[string]int, len(fields))}
	for f := range fields {
		ps.names = append(ps.names, f)
	}
	sort.Strings(ps.names)
	for i, f := range ps.names {
		ps.index[f] = i
	}
	for _, p := range progs {
		if p.usesPayload && p.payloadPath != nil {
			p.slot = ps.index[p.payloadPath[0]] + 1
		}
	}
	return ps
}

// decode decodes the live JSON records of b into slots (see
// payloadSlots); a record that is not an object is decoded whole, one
// that is not JSON is dead.
func (ps *payloadSlots) decode(w *worker, b *batch) {
	n := len(ps.names)
	if cap(b.slots) < len(b.recs)*n {
		b.slots = make([]any, len(b.recs)*n)
	}
	b.slots = b.slots[:len(b.recs)*n]
	slab := b.slots
	for i := range slab {
		slab[i] = absentField{}
	}
	var cells *jsonvalue.Cells
	if ps.alias {
		cells = &b.cells
		cells.Reset(len(b.recs) * n)
	}
	for i := range b.recs {
		r := &b.recs[i]
		if r.state != stLive {
			continue
		}
		s := slab[i*n : (i+1)*n : (i+1)*n]
		obj, err := w.dec.DecodeSlotsIn(r.Payload, ps.index, s, cells)
		switch {
		case err != nil:
			r.kill(err.Error())
		case obj:
			r.slots, r.slotTab = s, ps
		default:
			v, err := w.dec.Decode(r.Payload)
			if err != nil { // DecodeSlots validated it: cannot happen
				r.kill(err.Error())
				continue
			}
			r.value = v
		}
	}
}

// slotValue is the value of slot i (1-based, as program.slot) of r.
func (r *Record) slotValue(i int) any {
	v := r.slots[i-1]
	if _, absent := v.(absentField); absent {
		return nil
	}
	return v
}

// payloadValue is r's decoded payload as a value: for a record decoded
// into slots, a new object of the fields read, as DecodeFields would
// have made it. It changes nothing in r, so sinks may call it at once
// from several branches.
func (r *Record) payloadValue() any {
	if r.slots == nil {
		return r.value
	}
	m := make(map[string]any, len(r.slots))
	for i, v := range r.slots {
		if _, absent := v.(absentField); !absent {
			m[r.slotTab.names[i]] = v
		}
	}
	return m
}

// payload is payloadValue for a step that goes on to change the payload
// or read it whole: r leaves slot mode, holding that object as its value,
// so every later reader sees the one object.
func (r *Record) payload() any {
	if r.slots != nil {
		r.setValue(r.payloadValue())
	}
	return r.value
}

// setValue replaces r's decoded payload.
func (r *Record) setValue(v any) {
	r.value, r.slots, r.slotTab = v, nil, nil
}
