package jsonvalue

import "unsafe"

// Cells backs the values DecodeSlotsIn decodes, so that a decoded string
// or number costs no allocation of its own. Decoding a value into an any
// costs up to two: the string's bytes (a copy out of the document) and
// the box the interface points to (a string header, an int64, a float64).
// With Cells, a string without escapes is the document's own bytes, and
// every box is an element of a slice Cells keeps, reused from document to
// document: the interface points into it.
//
// Such a value is valid only while neither the document's bytes nor the
// Cells change: the caller must not write to the bytes it decoded, nor
// Reset the Cells, while any value decoded into them is still in use (a
// route reuses a batch's payload arena and Cells only once the batch is
// delivered and its sink keeps nothing of it). A value copied out of an
// any (s := v.(string)) still aliases the document's bytes.
type Cells struct {
	strs   []string
	ints   []int64
	floats []float64
	hint   int // room a kind gets when first used
}

// Reset empties c for the values of new documents, keeping room for about
// n values of each kind used before (a kind not used yet gets it when
// first used). Every value decoded into c before becomes invalid: its box
// is reused.
func (c *Cells) Reset(n int) {
	c.hint = n
	c.strs = resetCells(c.strs, n)
	c.ints = resetCells(c.ints, n)
	c.floats = resetCells(c.floats, n)
}

// Release drops what c holds (it may point into a document's bytes) and
// empties it, keeping its room.
func (c *Cells) Release() {
	clear(c.strs)
	c.strs, c.ints, c.floats = c.strs[:0], c.ints[:0], c.floats[:0]
}

func resetCells[T any](s []T, n int) []T {
	if cap(s) > 0 && cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// add appends v to s, with room for c.hint values when s has none.
func add[T any](s []T, v T, hint int) []T {
	if cap(s) == 0 {
		s = make([]T, 0, max(hint, 16))
	}
	return append(s, v)
}

// eface is the layout of an any: its dynamic type and a pointer to the
// value.
type eface struct {
	typ, data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

var (
	stringType  = typeWord("")
	int64Type   = typeWord(int64(0))
	float64Type = typeWord(float64(0))
)

// box is the any of type typ whose value is at data, as the compiler
// would make it had it copied the value to the heap there.
func box(typ, data unsafe.Pointer) (v any) {
	*(*eface)(unsafe.Pointer(&v)) = eface{typ: typ, data: data}
	return v
}

// str is s as an any boxed in c. Appending may move c.strs to a larger
// array: values boxed before keep pointing into the old one, which they
// keep alive and nothing writes to again.
func (c *Cells) str(s string) any {
	c.strs = add(c.strs, s, c.hint)
	return box(stringType, unsafe.Pointer(&c.strs[len(c.strs)-1]))
}

func (c *Cells) int(n int64) any {
	if n >= 0 && n < 256 {
		return n // the runtime boxes these without allocating
	}
	c.ints = add(c.ints, n, c.hint)
	return box(int64Type, unsafe.Pointer(&c.ints[len(c.ints)-1]))
}

func (c *Cells) float(f float64) any {
	c.floats = add(c.floats, f, c.hint)
	return box(float64Type, unsafe.Pointer(&c.floats[len(c.floats)-1]))
}
