package jsonvalue

import "unsafe"

// DecodeSlots decodes the members of a top-level object that a route
// reads straight into slots, without building the object: the member
// named k goes to slots[index[k]], every other member is validated and
// skipped. A member the document lacks leaves its slot as it was, so the
// caller fills slots with a marker of its own beforehand; a member that
// appears twice keeps its last value, as a decoded object would.
//
// obj is false when data is valid JSON but not an object: nothing is
// stored, and the caller decodes it whole (Decode) to see what it is.
// On error, slots may hold some members.
//
// index must not change while the Decoder is used with it: a small one is
// copied into a list the Decoder keeps (see slotKeys).
func (d *Decoder) DecodeSlots(data []byte, index map[string]int, slots []any) (obj bool, err error) {
	return d.DecodeSlotsIn(data, index, slots, nil)
}

// DecodeSlotsIn is DecodeSlots with the values it stores in slots boxed
// in cells, their strings aliasing data where they hold no escape: no
// allocation per value (see Cells for how long such a value is valid).
// With cells nil it is DecodeSlots.
func (d *Decoder) DecodeSlotsIn(data []byte, index map[string]int, slots []any, cells *Cells) (obj bool, err error) {
	d.data, d.pos, d.build, d.depth = data, 0, false, 0
	d.slotKeys.use(index)
	defer func() { d.data, d.build, d.cells = nil, false, nil }()
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		d.pos = 0
		_, err := d.document()
		return false, err
	}
	d.cells = cells
	if err := d.slotObject(index, slots); err != nil {
		return true, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return true, d.unexpected(d.data[d.pos], " after the value")
	}
	return true, nil
}

// slotObject is object for the top level of DecodeSlots: d.pos is at '{'
// and d.build is false.
func (d *Decoder) slotObject(index map[string]int, slots []any) error {
	d.pos++ // '{'
	d.depth = 1
	defer func() { d.depth = 0 }()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return nil
	}
	for member := 0; ; {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return d.errorf("want an object key")
		}
		slot, want, err := d.slotKeys.member(d, index, member)
		if err != nil {
			return err
		}
		member++
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return d.errorf("want ':' after an object key")
		}
		d.pos++
		d.skipSpace()
		d.build = want
		v, err := d.value()
		d.build = false
		if err != nil {
			return err
		}
		if want {
			slots[slot] = v
		}
		d.skipSpace()
		if d.pos >= len(d.data) {
			return d.errorf("unterminated object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return nil
		default:
			return d.errorf("want ',' or '}' in an object")
		}
	}
}

// slotKeysMax is the most keys slotKeys compares one by one: up to it, a
// comparison of lengths, then of bytes, beats hashing the key.
const slotKeysMax = 8

// slotKeys is a small slot index as a list: DecodeSlots looks a member's
// key up in every document, most often a key the route does not read,
// and the map's hashing was a tenth of a route's CPU.
type slotKeys struct {
	of    map[string]int // the index the list was made from
	keys  []string
	slots []int
	small bool // of has at most slotKeysMax keys: the list holds them all
	// seen holds the keys of the last documents' members, by place, with
	// their slots: lines of a file mostly repeat their keys in one order,
	// so the key at a place is first compared with the one seen there,
	// which needs neither a scan of the string nor a lookup.
	seen []seenKey
}

// seenKey is a member key seen at a place of a document, as its bytes
// between the quotes (a key without escapes only, valid as it was), and
// what find said of it.
type seenKey struct {
	text []byte
	slot int
	want bool
	set  bool // false: no key remembered at this place (text "" is a key)
}

// seenKeysMax bounds the places remembered and seenKeyMax a key's length:
// a document of many members or a long key is parsed as it comes.
const (
	seenKeysMax = 32
	seenKeyMax  = 64
)

// member parses the key at d.pos ('"') of the top-level object's member
// at place i and says which slot it goes to, if any: from seen when the
// document has the key seen at that place last (its bytes and the closing
// quote), else as parsed and looked up, remembering it for the next.
func (k *slotKeys) member(d *Decoder, index map[string]int, i int) (slot int, want bool, err error) {
	start := d.pos + 1
	if i < len(k.seen) {
		s := &k.seen[i]
		end := start + len(s.text)
		if s.set && end < len(d.data) && d.data[end] == '"' && string(d.data[start:end]) == string(s.text) {
			d.pos = end + 1
			return s.slot, s.want, nil
		}
	}
	// The key is looked up as parsed, without a string of its own.
	key, err := d.strBytes()
	if err != nil {
		return 0, false, err
	}
	slot, want = k.find(index, key)
	if i < seenKeysMax && len(key) <= seenKeyMax && len(key) == d.pos-1-start {
		// no escape: key is the document's bytes, as read
		for len(k.seen) <= i {
			k.seen = append(k.seen, seenKey{})
		}
		k.seen[i] = seenKey{text: append(k.seen[i].text[:0], key...), slot: slot, want: want, set: true}
	}
	return slot, want, nil
}

// use makes the list from index, unless it was made from it already.
func (k *slotKeys) use(index map[string]int) {
	if k.of != nil && sameMap(k.of, index) {
		return
	}
	k.of, k.keys, k.slots, k.small = index, k.keys[:0], k.slots[:0], len(index) <= slotKeysMax
	k.seen = k.seen[:0]
	if !k.small {
		return
	}
	for key, slot := range index {
		k.keys = append(k.keys, key)
		k.slots = append(k.slots, slot)
	}
}

// find is index[string(key)], from the list when it holds the index.
func (k *slotKeys) find(index map[string]int, key []byte) (int, bool) {
	if !k.small {
		slot, ok := index[string(key)]
		return slot, ok
	}
	for i, s := range k.keys {
		if len(s) == len(key) && s == string(key) {
			return k.slots[i], true
		}
	}
	return 0, false
}

// sameMap reports whether a and b are the same map (not equal ones): a
// map value is a pointer to the map, compared here without reflect's
// cost (it ran once a document).
func sameMap(a, b map[string]int) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}
