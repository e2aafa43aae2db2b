package runtime

import (
	"fmt"
	"sync"
)

// AckTracker follows records from read to ack and tells the source how far
// it may commit. Records are tracked in read order under consecutive
// sequence numbers; they may be acked in any order (concurrent workers,
// duplicates acked straight back), but the committable position only moves
// over a contiguous run of acked records, so a crash never skips a record
// that was read before an acked one and not yet acked itself.
//
// Memory is bounded by the number of records in flight, which the route
// bounds with its channels.
type AckTracker struct {
	mu   sync.Mutex
	base uint64     // sequence number of pending[head]
	head int        // first entry still pending
	ents []ackEntry // pending[head:] are tracked, not yet committed
	gaps bool       // positions may skip (see NewOffsetAckTracker)
}

type ackEntry struct {
	seq   uint64 // the record's sequence number (an offset tracker's may skip)
	next  int64  // source offset just after the record
	acked bool
	// parts, once a part of the record is acked (AckPart), are the parts
	// acked so far; the record is acked when all are.
	parts *partAcks
}

// partAcks are the acked parts of one record that became several (unnest).
type partAcks struct {
	n    uint32
	done uint32
	bits []uint64
}

// NewAckTracker starts a tracker whose first record is seq first.
func NewAckTracker(first uint64) *AckTracker {
	return &AckTracker{base: first}
}

// NewOffsetAckTracker starts a tracker over a source whose sequence numbers
// are offsets that may skip (a Kafka partition skips compacted records and
// transaction markers, a cursor column skips deleted ids, a CDC position
// jumps from one transaction's LSN to the next): a skipped position holds
// no entry, however wide the gap, and the committable position is the
// last acked record of the contiguous prefix.
func NewOffsetAckTracker(first uint64) *AckTracker {
	return &AckTracker{base: first, gaps: true}
}

// Next is the sequence number the next tracked record must carry (at
// least, for an offset tracker).
func (t *AckTracker) Next() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wantLocked()
}

func (t *AckTracker) wantLocked() uint64 {
	if t.gaps && t.head < len(t.ents) {
		return t.ents[len(t.ents)-1].seq + 1
	}
	return t.base + uint64(len(t.ents)-t.head)
}

// Track registers record seq, whose source offset after it is next.
// Records must be tracked in order without gaps, except by an offset
// tracker (NewOffsetAckTracker).
func (t *AckTracker) Track(seq uint64, next int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := t.wantLocked()
	switch {
	case seq < want || (seq > want && !t.gaps):
		return fmt.Errorf("ack tracker: record %d tracked out of order (want %d)", seq, want)
	case seq > want && t.head == len(t.ents):
		t.base = seq // nothing pending: start over at seq
		t.ents, t.head = t.ents[:0], 0
	}
	t.ents = append(t.ents, ackEntry{seq: seq, next: next})
	return nil
}

// Unacked is the number of tracked records not acked yet.
func (t *AckTracker) Unacked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.ents[t.head:] {
		if !e.acked {
			n++
		}
	}
	return n
}

// Ack marks record seq as acknowledged. Acking twice is harmless; acking a
// record never tracked is an error.
func (t *AckTracker) Ack(seq uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ackLocked(seq)
}

// AckAll acks every record in seqs under one lock.
func (t *AckTracker) AckAll(seqs []uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range seqs {
		if err := t.ackLocked(s); err != nil {
			return err
		}
	}
	return nil
}

// AckPart acks part of record seq, which became parts records (an unnest
// of an array of that many elements): the record is acked once every part
// is. Acking a part twice is harmless; parts 0 acks the record itself.
func (t *AckTracker) AckPart(seq uint64, part, parts uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if parts == 0 {
		return t.ackLocked(seq)
	}
	i, err := t.findLocked(seq)
	if err != nil || i < 0 || t.ents[i].acked {
		return err
	}
	e := &t.ents[i]
	if e.parts == nil {
		e.parts = &partAcks{n: parts, bits: make([]uint64, (parts+63)/64)}
	}
	p := e.parts
	if p.n != parts || part >= parts {
		return fmt.Errorf("ack tracker: record %d acked as part %d of %d, after parts of %d", seq, part, parts, p.n)
	}
	if bit := uint64(1) << (part % 64); p.bits[part/64]&bit == 0 {
		p.bits[part/64] |= bit
		p.done++
	}
	if p.done == p.n {
		e.acked, e.parts = true, nil
	}
	return nil
}

func (t *AckTracker) ackLocked(seq uint64) error {
	i, err := t.findLocked(seq)
	if err != nil || i < 0 {
		return err
	}
	t.ents[i].acked = true
	return nil
}

// findLocked returns the index of record seq's entry, or -1 when it is
// already committed.
func (t *AckTracker) findLocked(seq uint64) (int, error) {
	if seq < t.base {
		return -1, nil // already committed
	}
	var i int
	if t.gaps {
		// Entries are in seq order: find seq's.
		lo, hi := t.head, len(t.ents)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if t.ents[m].seq < seq {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo == len(t.ents) || t.ents[lo].seq != seq {
			return 0, fmt.Errorf("ack tracker: record %d acked but never tracked", seq)
		}
		i = lo
	} else {
		i = t.head + int(seq-t.base)
		if i >= len(t.ents) {
			return 0, fmt.Errorf("ack tracker: record %d acked but never tracked", seq)
		}
	}
	return i, nil
}

// Advance drops the contiguous acked prefix and reports the last record of
// it: the position the source may commit. ok is false when nothing new is
// committable.
func (t *AckTracker) Advance() (seq uint64, next int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.head < len(t.ents) && t.ents[t.head].acked {
		if t.gaps {
			t.base = t.ents[t.head].seq
		}
		seq, next, ok = t.base, t.ents[t.head].next, true
		t.head++
		t.base++
	}
	// Compact once the committed prefix dominates, keeping appends O(1)
	// amortised without holding committed entries forever.
	if t.head > 0 && t.head >= len(t.ents)/2 {
		n := copy(t.ents, t.ents[t.head:])
		t.ents = t.ents[:n]
		t.head = 0
	}
	return seq, next, ok
}

// Pending is the number of tracked records not yet committed.
func (t *AckTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ents) - t.head
}
