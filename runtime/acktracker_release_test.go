package runtime

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestAckTrackerReleasesAckedRuns: a run acked whole, at once or record by
// record, gives its next offsets back straight away (a fast file route
// acks hundreds of batches between two commits) and still commits at its
// last record's offset; a run partly acked keeps them all, since it may
// commit after any acked record.
func TestAckTrackerReleasesAckedRuns(t *testing.T) {
	tr := NewAckTracker(0)
	for first := uint64(0); first < 12; first += 4 {
		if err := tr.TrackRun(first, []int64{int64(first)*10 + 7, int64(first)*10 + 17, int64(first)*10 + 27, int64(first)*10 + 37}); err != nil {
			t.Fatal(err)
		}
	}
	mustNo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Run 0 (records 0-3) acked record by record, but not record 1; run 1
	// (4-7) whole; run 2 (8-11) record by record, all of them.
	mustNo(tr.AckAll([]uint64{0, 2, 3}))
	mustNo(tr.AckRange(4, 4))
	mustNo(tr.AckAll([]uint64{11, 9, 8, 10}))
	if tr.runs[0].nexts == nil {
		t.Error("a partly acked run gave its offsets back: it may still commit after record 0")
	}
	for i := 1; i < 3; i++ {
		if r := tr.runs[i]; r.nexts != nil || r.last != int64(r.first)*10+37 {
			t.Errorf("run %d, acked whole: nexts %v, last %d; want nil and %d", i, r.nexts, r.last, int64(r.first)*10+37)
		}
	}
	if seq, next, ok := tr.Advance(); !ok || seq != 0 || next != 7 {
		t.Fatalf("commit %d/%d/%v, want 0/7/true: record 1 is not acked", seq, next, ok)
	}
	mustNo(tr.Ack(1))
	if tr.runs[tr.head].nexts != nil {
		t.Error("run 0, acked whole at last: its offsets are still held")
	}
	if seq, next, ok := tr.Advance(); !ok || seq != 11 || next != 117 {
		t.Fatalf("commit %d/%d/%v, want 11/117/true", seq, next, ok)
	}
	// A run whose last unacked record is completed by its last part.
	mustNo(tr.TrackRun(12, []int64{300, 400}))
	mustNo(tr.Ack(12))
	mustNo(tr.AckPart(13, 1, 2))
	mustNo(tr.AckPart(13, 0, 2))
	if r := tr.runs[len(tr.runs)-1]; r.nexts != nil || r.last != 400 {
		t.Errorf("run completed by a part: nexts %v, last %d", r.nexts, r.last)
	}
	// A run of one record holds no slice at all.
	mustNo(tr.Track(14, 500))
	if r := tr.runs[len(tr.runs)-1]; r.nexts != nil || r.last != 500 {
		t.Errorf("run of one record: nexts %v, last %d", r.nexts, r.last)
	}
	if seq, next, ok := tr.Advance(); !ok || seq != 13 || next != 400 {
		t.Fatalf("commit %d/%d/%v, want 13/400/true", seq, next, ok)
	}
}

// ackStep is one thing done to a tracker: a range ack, a part ack (kids >
// 0) or, with advance, an Advance whose result is compared.
type ackStep struct {
	first     uint64
	n         int
	kid, kids uint32
	advance   bool
}

func rng(first uint64, n int) ackStep      { return ackStep{first: first, n: n} }
func one(seq uint64) ackStep               { return ackStep{first: seq, n: 1} }
func part(seq uint64, k, n uint32) ackStep { return ackStep{first: seq, kid: k, kids: n} }

var adv = ackStep{advance: true}

// refTracker is the commit rule written plainly, one entry per record: the
// committable position is the last record of the contiguous acked prefix,
// at that record's own next offset. It is what the tracker answered before
// runs gave their offsets back, and what it must still answer.
type refTracker struct {
	seqs  []uint64
	nexts []int64
	acked []bool
	parts map[int]map[uint32]bool
	head  int // records committed
}

func (r *refTracker) index(seq uint64) int {
	for i, s := range r.seqs {
		if s == seq {
			return i
		}
	}
	return -1
}

func (r *refTracker) do(s ackStep) (seq uint64, next int64, ok bool) {
	switch {
	case s.advance:
		h := r.head
		for h < len(r.acked) && r.acked[h] {
			h++
		}
		if h == r.head {
			return 0, 0, false
		}
		r.head = h
		return r.seqs[h-1], r.nexts[h-1], true
	case s.kids > 0:
		i := r.index(s.first)
		if r.parts[i] == nil {
			r.parts[i] = map[uint32]bool{}
		}
		r.parts[i][s.kid] = true
		if len(r.parts[i]) == int(s.kids) {
			r.acked[i] = true
		}
	default:
		for k := range s.n {
			r.acked[r.index(s.first+uint64(k))] = true
		}
	}
	return 0, 0, false
}

// TestAckTrackerCommitsAsBefore: on in-order, out-of-order and failed acks
// (records never acked, or acked late by a retry), whole runs and single
// records, parts and gaps, the tracker commits exactly the positions
// refTracker does, however its runs keep their offsets.
func TestAckTrackerCommitsAsBefore(t *testing.T) {
	tests := []struct {
		name  string
		gaps  bool  // an offset tracker; runs then start 100 apart
		runs  []int // run lengths; record i of the run from seq s has next offset s*7+i*i+3
		steps []ackStep
	}{
		{"whole runs in order", false, []int{3, 4, 2},
			[]ackStep{rng(0, 3), adv, rng(3, 4), adv, rng(7, 2), adv}},
		{"whole runs out of order", false, []int{3, 4, 2},
			[]ackStep{rng(7, 2), adv, rng(3, 4), adv, rng(0, 3), adv}},
		{"records out of order within runs", false, []int{4, 4},
			[]ackStep{one(2), one(6), adv, one(0), adv, one(3), one(1), adv, one(7), one(5), adv, one(4), adv}},
		{"a record fails: later runs acked whole wait", false, []int{3, 3, 3},
			[]ackStep{one(0), one(2), rng(3, 3), rng(6, 3), adv, adv}},
		{"a failed record retried late", false, []int{3, 3, 3},
			[]ackStep{one(0), one(2), rng(3, 3), adv, rng(6, 3), adv, one(1), adv}},
		{"a partly committed run acked whole at last", false, []int{5, 2},
			[]ackStep{one(0), one(1), adv, rng(5, 2), adv, rng(2, 3), adv}},
		{"a range over a partly committed run", false, []int{5},
			[]ackStep{one(0), one(1), adv, rng(0, 5), adv}},
		{"acked twice", false, []int{3, 3},
			[]ackStep{rng(0, 3), rng(0, 3), adv, one(4), one(4), adv, rng(3, 3), adv}},
		{"single records", false, []int{1, 1, 1, 1},
			[]ackStep{one(1), one(3), adv, one(0), adv, one(2), adv}},
		{"a part lost, then delivered", false, []int{3, 3},
			[]ackStep{one(0), part(1, 0, 2), one(2), rng(3, 3), adv, part(1, 1, 2), adv}},
		{"the last part of a run completes it", false, []int{3, 1},
			[]ackStep{one(0), one(1), part(2, 1, 2), one(3), adv, part(2, 0, 2), adv}},
		{"gaps: whole runs out of order", true, []int{3, 2, 4},
			[]ackStep{rng(200, 4), rng(100, 2), adv, rng(0, 3), adv}},
		{"gaps: a record fails", true, []int{3, 2, 4},
			[]ackStep{rng(0, 3), one(100), rng(200, 4), adv, one(101), adv}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCommitsAsBefore(t, tc.gaps, tc.runs, tc.steps)
		})
	}
}

// TestAckTrackerCommitsAsBeforeShuffled does the same over random runs
// acked in random order, whole, record by record or not at all (a failed
// write), with the failed ones retried at the end.
func TestAckTrackerCommitsAsBeforeShuffled(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		var runs []int
		for range 2 + r.IntN(20) {
			runs = append(runs, 1+r.IntN(70))
		}
		var steps, late []ackStep
		first := uint64(0)
		for _, n := range runs {
			switch r.IntN(4) {
			case 0: // whole
				steps = append(steps, rng(first, n))
			case 1: // record by record, in any order; one may fail
				lost := -1
				if r.IntN(2) == 0 {
					lost = r.IntN(n)
				}
				for _, i := range r.Perm(n) {
					if i == lost {
						late = append(late, one(first+uint64(i)))
						continue
					}
					steps = append(steps, one(first+uint64(i)))
				}
			case 2: // the write failed: retried at the end
				late = append(late, rng(first, n))
			default: // a part of it, then the rest
				k := r.IntN(n)
				steps = append(steps, rng(first+uint64(k), n-k))
				if k > 0 {
					late = append(late, rng(first, k))
				}
			}
			first += uint64(n)
		}
		r.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
		r.Shuffle(len(late), func(i, j int) { late[i], late[j] = late[j], late[i] })
		var all []ackStep
		for _, s := range append(steps, late...) {
			all = append(all, s)
			if r.IntN(3) == 0 {
				all = append(all, adv)
			}
		}
		all = append(all, adv)
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			checkCommitsAsBefore(t, false, runs, all)
		})
	}
}

func checkCommitsAsBefore(t *testing.T, gaps bool, runs []int, steps []ackStep) {
	t.Helper()
	tr := NewAckTracker(0)
	if gaps {
		tr = NewOffsetAckTracker(0)
	}
	ref := &refTracker{parts: map[int]map[uint32]bool{}}
	first := uint64(0)
	for _, n := range runs {
		nexts := make([]int64, n)
		for i := range nexts {
			nexts[i] = int64(first)*7 + int64(i*i) + 3
			ref.seqs = append(ref.seqs, first+uint64(i))
			ref.nexts = append(ref.nexts, nexts[i])
			ref.acked = append(ref.acked, false)
		}
		if err := tr.TrackRun(first, nexts); err != nil {
			t.Fatal(err)
		}
		first += uint64(n)
		if gaps {
			first = (first/100 + 1) * 100
		}
	}
	for i, s := range steps {
		wantSeq, wantNext, wantOK := ref.do(s)
		var err error
		switch {
		case s.advance:
			seq, next, ok := tr.Advance()
			if ok != wantOK || (ok && (seq != wantSeq || next != wantNext)) {
				t.Fatalf("step %d: commit %d/%d/%v, want %d/%d/%v", i, seq, next, ok, wantSeq, wantNext, wantOK)
			}
			continue
		case s.kids > 0:
			err = tr.AckPart(s.first, s.kid, s.kids)
		case s.n == 1:
			err = tr.Ack(s.first)
		default:
			err = tr.AckRange(s.first, s.n)
		}
		if err != nil {
			t.Fatalf("step %d %+v: %v", i, s, err)
		}
	}
	if got, want := tr.Pending(), len(ref.acked)-ref.head; got != want {
		t.Errorf("pending %d, want %d", got, want)
	}
}
