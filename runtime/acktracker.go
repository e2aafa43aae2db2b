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
// Records are kept in runs of consecutive sequence numbers, one per batch
// a source read: a run acked as a whole (AckRange) costs one entry and no
// per-record work, while records acked one at a time still commit one at a
// time. Memory is bounded by the number of batches in flight, which the
// route bounds with its channels, plus the next offsets of the runs not
// wholly acked: a run commits its records' offsets only while some of it
// is unacked (it may stop after any acked record), so a run acked whole
// gives them back at once and keeps its last, the only one it can commit.
// A fast file route acks hundreds of runs between two commits.
type AckTracker struct {
	mu   sync.Mutex
	head int      // first run still pending
	runs []ackRun // runs[head:] are tracked, not yet wholly committed
	// want is the sequence number the next tracked record must carry (at
	// least, for an offset tracker); floor is the first not committed.
	want, floor uint64
	gaps        bool      // positions may skip (see NewOffsetAckTracker)
	free        [][]int64 // next-offset slices of committed runs, for reuse
}

// ackRun is a run of records with consecutive sequence numbers.
type ackRun struct {
	first uint64 // the first record's sequence number
	// nexts is the source offset just after each record, until every
	// record is acked (nil for a run of one record); last is the last
	// record's, kept throughout.
	nexts []int64
	last  int64
	count uint32 // records in the run
	// done counts the acked records; all of them are when it is count,
	// and otherwise bits says which.
	done uint32
	// head is how many leading records are committed.
	head uint32
	bits []uint64
	// parts holds, by index in the run, the acked parts of records that
	// became several (unnest), until all of a record's are acked.
	parts map[uint32]*partAcks
	// whole: a block's run (TrackBlock), acked only as a whole, which
	// keeps no offset per record.
	whole bool
}

func (r *ackRun) n() uint32 { return r.count }

// next is the source offset after record i of the run, which must be the
// last record or one of a run not wholly acked.
func (r *ackRun) next(i uint32) int64 {
	if i == r.count-1 {
		return r.last
	}
	return r.nexts[i]
}

func (r *ackRun) acked(i uint32) bool {
	return r.done == r.n() || (r.bits != nil && r.bits[i/64]&(1<<(i%64)) != 0)
}

// ackOne acks record i of the run.
func (r *ackRun) ackOne(i uint32) {
	if r.done == r.n() {
		return
	}
	if r.bits == nil {
		r.bits = make([]uint64, (r.n()+63)/64)
	}
	if bit := uint64(1) << (i % 64); r.bits[i/64]&bit == 0 {
		r.bits[i/64] |= bit
		r.done++
	}
	if r.done == r.n() {
		r.bits, r.parts = nil, nil
	}
}

// ackSpan acks records i through i+n-1 of the run.
func (r *ackRun) ackSpan(i, n uint32) {
	if i == 0 && n == r.n() {
		r.done, r.bits, r.parts = r.n(), nil, nil
		return
	}
	for j := i; j < i+n; j++ {
		r.ackOne(j)
	}
}

// partAcks are the acked parts of one record that became several (unnest).
type partAcks struct {
	n    uint32
	done uint32
	bits []uint64
}

// NewAckTracker starts a tracker whose first record is seq first.
func NewAckTracker(first uint64) *AckTracker {
	return &AckTracker{want: first, floor: first}
}

// NewOffsetAckTracker starts a tracker over a source whose sequence numbers
// are offsets that may skip (a Kafka partition skips compacted records and
// transaction markers, a cursor column skips deleted ids, a CDC position
// jumps from one transaction's LSN to the next): a skipped position holds
// no entry, however wide the gap, and the committable position is the
// last acked record of the contiguous prefix.
func NewOffsetAckTracker(first uint64) *AckTracker {
	return &AckTracker{want: first, floor: first, gaps: true}
}

// Next is the sequence number the next tracked record must carry (at
// least, for an offset tracker).
func (t *AckTracker) Next() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.want
}

// Track registers record seq, whose source offset after it is next.
// Records must be tracked in order without gaps, except by an offset
// tracker (NewOffsetAckTracker).
func (t *AckTracker) Track(seq uint64, next int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trackLocked(seq, []int64{next})
}

// TrackRun registers len(nexts) records with consecutive sequence numbers
// from first, nexts[i] the source offset after record first+i, as one run.
// It copies nexts.
func (t *AckTracker) TrackRun(first uint64, nexts []int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trackLocked(first, nexts)
}

// TrackBlock registers n records with consecutive sequence numbers from
// first as one run acked only as a whole (a block of lines, see
// Batch.AddBlock): last is the source offset after its last record, the
// only position the run can commit, so it keeps no offset per record and
// refuses an ack of part of it.
func (t *AckTracker) TrackBlock(first uint64, n int, last int64) error {
	if n <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkOrderLocked(first); err != nil {
		return err
	}
	t.runs = append(t.runs, ackRun{first: first, last: last, count: uint32(n), whole: true})
	t.want = first + uint64(n)
	return nil
}

// checkOrderLocked refuses a run that does not start where the last one
// ended (an offset tracker's may skip ahead) and resets an empty tracker.
func (t *AckTracker) checkOrderLocked(first uint64) error {
	if first < t.want || (first > t.want && !t.gaps) {
		return fmt.Errorf("ack tracker: record %d tracked out of order (want %d)", first, t.want)
	}
	if t.head == len(t.runs) {
		t.runs, t.head = t.runs[:0], 0
		t.floor = first // nothing pending: an offset tracker starts over at first
	}
	return nil
}

func (t *AckTracker) trackLocked(first uint64, nexts []int64) error {
	if len(nexts) == 0 {
		return nil
	}
	if err := t.checkOrderLocked(first); err != nil {
		return err
	}
	var own []int64
	if len(nexts) > 1 {
		if k := len(t.free); k > 0 && cap(t.free[k-1]) >= len(nexts) {
			own, t.free = t.free[k-1][:0], t.free[:k-1]
		}
		own = append(own, nexts...)
	}
	t.runs = append(t.runs, ackRun{first: first, nexts: own, last: nexts[len(nexts)-1], count: uint32(len(nexts))})
	t.want = first + uint64(len(nexts))
	return nil
}

// release gives back the next offsets of run r once it is wholly acked:
// from then on it commits only as a whole, at its last record.
func (t *AckTracker) release(r *ackRun) {
	if r.done != r.count || r.nexts == nil {
		return
	}
	if len(t.free) < freeRunsMax {
		t.free = append(t.free, r.nexts)
	}
	r.nexts = nil
}

// Unacked is the number of tracked records not acked yet.
func (t *AckTracker) Unacked() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for i := t.head; i < len(t.runs); i++ {
		n += int(t.runs[i].n() - t.runs[i].done)
	}
	return n
}

// Ack marks record seq as acknowledged. Acking twice is harmless; acking a
// record never tracked is an error.
func (t *AckTracker) Ack(seq uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ackRangeLocked(seq, 1)
}

// AckAll acks every record in seqs under one lock.
func (t *AckTracker) AckAll(seqs []uint64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range seqs {
		if err := t.ackRangeLocked(s, 1); err != nil {
			return err
		}
	}
	return nil
}

// AckRange acks the n records with consecutive sequence numbers from
// first, which must have been tracked in one run (TrackRun): a run acked
// whole costs one step whatever its length.
func (t *AckTracker) AckRange(first uint64, n int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ackRangeLocked(first, n)
}

func (t *AckTracker) ackRangeLocked(first uint64, n int) error {
	if n <= 0 {
		return nil
	}
	r, i, err := t.findLocked(first)
	if err != nil || r == nil {
		if r == nil && err == nil && first+uint64(n) > t.floor {
			// Partly committed already: ack what is left of it.
			return t.ackRangeLocked(t.floor, int(first+uint64(n)-t.floor))
		}
		return err
	}
	if uint64(i)+uint64(n) > uint64(r.n()) {
		return fmt.Errorf("ack tracker: records %d to %d acked as one run, but %d tracked from %d", first, first+uint64(n)-1, r.n(), r.first)
	}
	if r.whole && (i != 0 || uint32(n) != r.n()) {
		return fmt.Errorf("ack tracker: records %d to %d acked, part of the block of %d tracked from %d (a block is acked whole)", first, first+uint64(n)-1, r.n(), r.first)
	}
	r.ackSpan(i, uint32(n))
	t.release(r)
	return nil
}

// AckPart acks part of record seq, which became parts records (an unnest
// of an array of that many elements): the record is acked once every part
// is. Acking a part twice is harmless; parts 0 acks the record itself.
func (t *AckTracker) AckPart(seq uint64, part, parts uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if parts == 0 {
		return t.ackRangeLocked(seq, 1)
	}
	r, i, err := t.findLocked(seq)
	if err != nil || r == nil || r.acked(i) {
		return err
	}
	if r.whole {
		return fmt.Errorf("ack tracker: record %d acked as part %d of %d, in a block (acked whole)", seq, part, parts)
	}
	if r.parts == nil {
		r.parts = map[uint32]*partAcks{}
	}
	p := r.parts[i]
	if p == nil {
		p = &partAcks{n: parts, bits: make([]uint64, (parts+63)/64)}
		r.parts[i] = p
	}
	if p.n != parts || part >= parts {
		return fmt.Errorf("ack tracker: record %d acked as part %d of %d, after parts of %d", seq, part, parts, p.n)
	}
	if bit := uint64(1) << (part % 64); p.bits[part/64]&bit == 0 {
		p.bits[part/64] |= bit
		p.done++
	}
	if p.done == p.n {
		delete(r.parts, i)
		r.ackOne(i)
		t.release(r)
	}
	return nil
}

// findLocked returns the run holding record seq and its index there, or a
// nil run when the record is already committed.
func (t *AckTracker) findLocked(seq uint64) (*ackRun, uint32, error) {
	if seq < t.floor {
		return nil, 0, nil // already committed
	}
	// Runs are in seq order: find the last that starts at or before seq.
	lo, hi := t.head, len(t.runs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.runs[m].first <= seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == t.head {
		return nil, 0, fmt.Errorf("ack tracker: record %d acked but never tracked", seq)
	}
	r := &t.runs[lo-1]
	if seq-r.first >= uint64(r.n()) {
		return nil, 0, fmt.Errorf("ack tracker: record %d acked but never tracked", seq)
	}
	return r, uint32(seq - r.first), nil
}

// Advance drops the contiguous acked prefix and reports the last record of
// it: the position the source may commit. ok is false when nothing new is
// committable.
func (t *AckTracker) Advance() (seq uint64, next int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.head < len(t.runs) {
		r := &t.runs[t.head]
		h := r.head
		if r.done == r.n() {
			h = r.n()
		} else {
			for h < r.n() && r.acked(h) {
				h++
			}
		}
		if h > r.head {
			seq, next, ok = r.first+uint64(h)-1, r.next(h-1), true
			r.head = h
			t.floor = seq + 1
		}
		if h < r.n() {
			break
		}
		*r = ackRun{} // wholly acked: its offsets were released then
		t.head++
	}
	// Compact once the committed prefix dominates, keeping appends O(1)
	// amortised without holding committed entries forever.
	if t.head > 0 && t.head >= len(t.runs)/2 {
		n := copy(t.runs, t.runs[t.head:])
		clear(t.runs[n:])
		t.runs = t.runs[:n]
		t.head = 0
	}
	return seq, next, ok
}

// freeRunsMax is how many next-offset slices of wholly acked runs a
// tracker keeps for the runs it tracks next. A run gives its slice back
// when its last record is acked, so the list holds about as many as the
// route has batches in flight; keeping only a few, the rest were garbage,
// and the collector ran every few batches to take them back.
const freeRunsMax = 128

// Pending is the number of tracked records not yet committed.
func (t *AckTracker) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for i := t.head; i < len(t.runs); i++ {
		n += int(t.runs[i].n() - t.runs[i].head)
	}
	return n
}
