package runtime

import (
	"slices"
	"unsafe"
)

// A route that moves lines as they were read (file → file, stdin →
// stdout) and whose steps leave payloads alone hands its sink the lines
// of whole batches as the source copied them into the batch's arena, and
// reuses its batches once acked: per record there is then no copy, no
// allocation and no ack of its own.

// freeBatches holds batches routes are done with, for NewBatchArena: a
// source reading lines then allocates a batch's records and arena once,
// not per batch. Not a sync.Pool: every other garbage collection empties
// a pool, and each refill costs a batch's allocation, its zeroing and the
// page faults of its fresh memory again (a tenth of a file → file route's
// CPU). It holds at most freeBatchesMax batches, each no larger than
// freeArenaMax: what a route had in flight, not more.
var freeBatches = make(chan *Batch, freeBatchesMax)

const (
	// freeBatchesMax is more than a line route holds in flight: two
	// batches a processing worker in the queue to the workers, a group
	// queued for the sink and one being written (see groupSize).
	freeBatchesMax = 32
	// freeArenaMax: a batch of long lines (up to maxBatchBytes) is not
	// kept once done with.
	freeArenaMax = 1 << 20
)

// recycle hands the batches of a delivered and acked group back to
// freeBatches. Only a route whose every end takes no reference to a
// record past its write (rt.recycles) calls it.
func recycle(group []*batch) {
	for _, b := range group {
		if !b.pooled || cap(b.arena) > freeArenaMax {
			continue
		}
		clear(b.recs)  // no stale metadata or decoded payload kept alive
		clear(b.slots) // nor decoded values
		b.cells.Release()
		*b = Batch{recs: b.recs[:0], arena: b.arena[:0], spans: b.spans[:0], slots: b.slots[:0], cells: b.cells}
		select {
		case freeBatches <- b:
		default: // full: the collector takes it
		}
	}
}

// reusedBatch is a batch from freeBatches, or nil when there is none.
func reusedBatch() *Batch {
	select {
	case b := <-freeBatches:
		return b
	default:
		return nil
	}
}

// keepsPayloads reports whether a step is one known to leave payloads as
// read (it may read them, set metadata, drop or dead-letter records):
// an allow-list, so a step added later is assumed to change them.
func keepsPayloads(s step) bool {
	switch s.(type) {
	case *idStep, *filterStep, *dedupStep:
		return true
	}
	return false
}

// linesPassThrough decides, once the route is built, whether its sink
// takes batches' lines as read (rt.lineSink) and whether its batches are
// reused (rt.recycles). Both need no handler (it may replace payloads or
// keep records), no output steps and steps that keep payloads (an
// allow-list); lines need a sink writing bare lines, reuse a sink that
// keeps nothing of a record once written: a line sink, or one that says
// so (ReleasingSink: a SQLite or PostgreSQL sink).
func (rt *route) linesPassThrough(hasHandler bool) {
	if hasHandler || len(rt.outSteps) > 0 {
		return
	}
	for _, s := range rt.steps {
		if !keepsPayloads(s) {
			return
		}
	}
	if ls, ok := rt.sink.(LineSink); ok && ls.WritesLines() {
		rt.lineSink = ls
	}
	f, releases := rt.sink.(ReleasingSink)
	if rt.lineSink == nil && !(releases && f.ReleasesRecords()) {
		return
	}
	// A line sink keeps nothing of a record once written; a DLQ's target
	// must not either for the batch to be reused, nor a source that keeps
	// payloads to answer with after the ack (a Replier sends its replies
	// from Commit).
	_, dlqLines := rt.dlq.(LineSink)
	_, replies := rt.src.(Replier)
	rt.recycles = (rt.dlq == nil || dlqLines) && !replies
	if rt.recycles && rt.slots != nil {
		// Nothing keeps a decoded value past the batch's delivery, so it
		// may alias the batch's arena and cells (payloadSlots.alias)
		// unless a dedup step keeps its key: its store holds the key
		// after the batch is reused.
		rt.slots.alias = !slices.ContainsFunc(rt.steps, func(s step) bool {
			_, dedup := s.(*dedupStep)
			return dedup
		})
	}
}

// groupLines returns the lines of a group's live records, as the sink
// would write them, cut from the batches' arenas: one buffer per run of
// consecutive live records. ok is false when a batch holds a record not
// copied into its arena (AddCopy) or one a step changed; then the sink
// gets the records. Record i of a batch starts in its arena where the
// lines of the records before it end (AddCopy appends each payload and a
// newline in read order, and no step the route runs moves a payload).
func groupLines(group []*batch, lines [][]byte) ([][]byte, bool) {
	lines = lines[:0]
	for _, b := range group {
		if b.blockLines > 0 { // a block: every line, as read
			lines = append(lines, b.arena)
			continue
		}
		if b.copied != len(b.recs) {
			return lines, false
		}
		off, start := 0, -1 // start: where the current run of live records starts
		for i := range b.recs {
			r := &b.recs[i]
			if r.dirty {
				return lines, false
			}
			if r.state == stLive {
				if start < 0 {
					start = off
				}
			} else if start >= 0 {
				lines = append(lines, b.arena[start:off])
				start = -1
			}
			off += len(r.Payload) + 1
		}
		if off != len(b.arena) {
			return lines, false // not the arena's layout after all
		}
		if start >= 0 && off > start {
			lines = append(lines, b.arena[start:off])
		}
	}
	return lines, true
}

// blocksPassThrough asks the source, before it reads, for blocks of lines
// (BlockSource) when nothing would look at a record on its way: the sink
// takes lines as read (linesPassThrough), the route has no step at all
// (even a filter or an id reads records), payloads are text or raw that
// nobody decodes, no sink or DLQ expression is evaluated per record, and
// no tap may ask to watch records. A block is then moved as the source
// read it: one copy into the batch, one write, one ack of its run of
// positions, and the commit saves the position after its last line only
// once the sink's sync made it durable, as for records.
func (rt *route) blocksPassThrough() {
	bs, ok := rt.src.(BlockSource)
	if !ok || rt.lineSink == nil || len(rt.steps) > 0 || len(rt.outSteps) > 0 || rt.needPayload ||
		rt.slots != nil || len(rt.sinkProgs) > 0 || rt.tap != nil {
		return
	}
	if rt.srcFormat != "text" && rt.srcFormat != "raw" {
		return
	}
	bs.PassBlocks()
}

// pageBytes is the smallest page the kernel maps.
const pageBytes = 4096

// freshRecords is an empty slice of records with room for n, its memory
// written to once a page before it is returned. Records hold pointers, so
// while the collector marks, storing one (AddLines, AddCopy) goes through
// its write barrier, which first reads the pointers it replaces: on a page
// never touched, that read maps the kernel's shared zero page, and the
// store that follows faults again to replace it, flushing the page from
// every core's TLB (an interrupt to each). In a file → Kafka route run as
// a process, those flushes were a tenth of its CPU. A plain byte store
// first maps each page writable at once. It writes a zero over a zero:
// the memory is fresh, so every pointer in it stays nil.
func freshRecords(n int) []Record {
	recs := make([]Record, n)
	base := unsafe.Pointer(unsafe.SliceData(recs))
	size := uintptr(n) * unsafe.Sizeof(Record{})
	for off := uintptr(0); off < size; off += pageBytes {
		*(*byte)(unsafe.Add(base, off)) = 0
	}
	return recs[:0]
}
