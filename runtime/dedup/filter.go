package dedup

import (
	"fmt"
	"hash/maphash"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
)

// keyFilter is a Bloom filter over every key the database holds, in memory,
// shared by the Stores of one directory: a key it has never been told of
// is certainly not in the database, so Reserve need not seek it. Almost
// every key of a stream is new, and most lookups end here.
//
// It never forgets (a swept key stays in the filter and costs a seek, as
// every key did before), and it must be told of every key written: it is
// built from a scan of the database when the directory's reservations are
// made, and Promote and AdoptLegacy add what they write before the write
// can be seen as done (see Reserve). Sized for twice the keys found at
// open (at least 1M), 10 bits a key: past that it fills up and lets more
// keys through to the seek, never fewer.
type keyFilter struct {
	words  []atomic.Uint64 // blocks of blockWords words, one cache line each
	blocks uint64
}

// filterBitsPerKey and filterHashes give about 1–2% false positives at the
// filter's sized capacity; every probe of a key falls in one 64-byte block,
// so a lookup costs one cache miss, not seven.
const (
	filterBitsPerKey = 10
	filterHashes     = 7
	blockWords       = 8
	filterMinKeys    = 1 << 20
	// filterMaxKeys bounds the filter's memory (16M keys: 20 MiB); a store
	// holding more at open has no filter and seeks every key.
	filterMaxKeys = 16 << 20
)

var filterSeed = maphash.MakeSeed()

func newKeyFilter(keys int) *keyFilter {
	nbits := uint64(max(keys, filterMinKeys)) * filterBitsPerKey
	blocks := nbits/(64*blockWords) + 1
	return &keyFilter{words: make([]atomic.Uint64, blocks*blockWords), blocks: blocks}
}

// probes yields the filter's bit positions for key: a block from the high
// half of the hash, and filterHashes bits inside it from the low half.
func (f *keyFilter) probes(key []byte, visit func(word uint64, bit uint64) bool) bool {
	h := maphash.Bytes(filterSeed, key)
	base := ((h >> 32) % f.blocks) * blockWords
	h1, h2 := uint32(h), uint32(h>>16)|1
	for i := range uint32(filterHashes) {
		b := uint64((h1 + i*h2) % (64 * blockWords))
		if !visit(base+b/64, b%64) {
			return false
		}
	}
	return true
}

func (f *keyFilter) add(key []byte) {
	f.probes(key, func(w, b uint64) bool {
		f.words[w].Or(1 << b)
		return true
	})
}

// mayContain is false only for a key never added.
func (f *keyFilter) mayContain(key []byte) bool {
	return f.probes(key, func(w, b uint64) bool {
		return f.words[w].Load()&(1<<b) != 0
	})
}

// loadFilter builds the filter of every dedup key in db (nil when there
// are more than filterMaxKeys): one pass counts them, a second adds them.
func loadFilter(db *pebble.DB, dir string) (*keyFilter, error) {
	var f *keyFilter
	count := 0
	for pass := range 2 {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: allLower, UpperBound: allUpper})
		if err != nil {
			return nil, fmt.Errorf("dedup store %s: load key filter: %w", dir, err)
		}
		for it.First(); it.Valid(); it.Next() {
			if pass == 0 {
				if count++; count > filterMaxKeys {
					it.Close()
					return nil, nil
				}
				continue
			}
			f.add(it.Key())
		}
		if err := it.Close(); err != nil {
			return nil, fmt.Errorf("dedup store %s: load key filter: %w", dir, err)
		}
		if pass == 0 {
			f = newKeyFilter(2 * count)
		}
	}
	return f, nil
}
