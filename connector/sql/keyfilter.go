package sql

import "math/bits"

// keyFilter is a Bloom filter of 64-bit key hashes whose bits for one
// key all lie in one 64-byte block, so a test or an add touches one
// cache line, not one a bit: with k lines a key, as a plain Bloom
// filter has, the split write's filter of a million keys (pgsplit.go)
// spent a fifth of a route's CPU waiting on memory. At filterBitsPerKey
// bits a key its false positive rate is about 2%; a false positive only
// sends a row by the slower way.
type keyFilter struct {
	blocks []filterBlock
	added  int // keys added since the filter was last emptied
	limit  int // keys it holds before it is emptied
}

type filterBlock [8]uint64

const (
	filterBitsPerKey = 10
	filterProbes     = 6 // bits set a key, each of 9 bits of the hash's remix
)

func newKeyFilter(keys int) *keyFilter {
	return &keyFilter{blocks: make([]filterBlock, max(1, keys*filterBitsPerKey/512)), limit: keys}
}

// testAndAdd reports whether h may have been added before, and adds it.
// Once the filter holds its limit of keys it is emptied first: a key
// added before then tests absent again, which the filter's users allow.
func (f *keyFilter) testAndAdd(h uint64) bool {
	if f.added >= f.limit {
		clear(f.blocks)
		f.added = 0
	}
	hi, _ := bits.Mul64(h, uint64(len(f.blocks)))
	b := &f.blocks[hi]
	x := bits.RotateLeft64(h, 32) * 0x9e3779b97f4a7c15
	present := true
	for range filterProbes {
		pos := x & 511
		w, bit := pos>>6, uint64(1)<<(pos&63)
		if b[w]&bit == 0 {
			present = false
			b[w] |= bit
		}
		x >>= 9
	}
	if !present {
		f.added++
	}
	return present
}
