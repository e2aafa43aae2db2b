package sql

import "sync"

// pgScratch is what a PostgreSQL write binds its rows into: the rows,
// their values and the buffers they are cut from, the split write's
// parts and the COPY text. A write takes one from its sink's pool and
// puts it back when Write returns (the sink keeps nothing of a write
// after it, see ReleasesRecords), so the next write reuses the memory:
// fresh, it was about 200 bytes a record and most of a file →
// PostgreSQL route's garbage (300 MB of allocation per 1M lines became
// 55; `go test -bench PostgresSink/upsert -benchmem`: 71.6 → 32 MB for
// 200k rows).
type pgScratch struct {
	rows                  [][][]byte
	cells                 [][]byte
	arena                 []byte
	live                  []int
	before, copied, after []int
	first                 map[uint64]bool // of the write's keys: whose first row went by COPY
	key                   []byte
	copy                  copyReader
	aside                 *asideWrite // part 1 of a streamed split write, on a connection of its own
	inexact               bool        // a key of the write is not in its form (pgexactkey.go)
}

// scratchPool hands out a sink's scratches; one per write in flight.
type scratchPool struct{ p sync.Pool }

func (sp *scratchPool) get() *pgScratch {
	if sc, ok := sp.p.Get().(*pgScratch); ok {
		return sc
	}
	return &pgScratch{}
}

func (sp *scratchPool) put(sc *pgScratch) { sp.p.Put(sc) }

// copyOf is sc's COPY reader over rows[live...], its buffer kept.
func (sc *pgScratch) copyOf(rows [][][]byte, live []int) *copyReader {
	sc.copy = copyReader{rows: rows, live: live, text: copyText{buf: sc.copy.text.buf[:0]}}
	return &sc.copy
}

// copyText is the text of sc's COPY reader, emptied, its buffer kept,
// for a reader of another kind (pgstream.go).
func (sc *pgScratch) copyText() *copyText {
	sc.copyOf(nil, nil)
	return &sc.copy.text
}

// grow returns s[:n], reallocated when its capacity is short; what it
// holds is left for the caller to overwrite.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
