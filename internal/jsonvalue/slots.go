package jsonvalue

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
func (d *Decoder) DecodeSlots(data []byte, index map[string]int, slots []any) (obj bool, err error) {
	d.data, d.pos, d.build, d.depth = data, 0, false, 0
	defer func() { d.data, d.build = nil, false }()
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != '{' {
		d.pos = 0
		_, err := d.document()
		return false, err
	}
	if err := d.slotObject(index, slots); err != nil {
		return true, err
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return true, d.errorf("unexpected %q after the value", d.data[d.pos])
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
	for {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return d.errorf("want an object key")
		}
		// The key is looked up as parsed, without a string of its own.
		k, err := d.strBytes()
		if err != nil {
			return err
		}
		slot, want := index[string(k)]
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
