package runtime

import (
	"math/rand/v2"
	"testing"
)

func TestAckTracker(t *testing.T) {
	type commit struct {
		seq  uint64
		next int64
		ok   bool
	}
	tests := []struct {
		name  string
		first uint64
		n     int      // records tracked; record i has next offset (i+1)*10
		acks  [][]int  // ack rounds (indexes relative to first); Advance after each
		want  []commit // one per round
	}{
		{"in order", 0, 3, [][]int{{0}, {1}, {2}},
			[]commit{{0, 10, true}, {1, 20, true}, {2, 30, true}}},
		{"gap holds commit", 0, 4, [][]int{{1, 2}, {0}, {3}},
			[]commit{{0, 0, false}, {2, 30, true}, {3, 40, true}}},
		{"reverse order", 0, 3, [][]int{{2}, {1}, {0}},
			[]commit{{0, 0, false}, {0, 0, false}, {2, 30, true}}},
		{"resume from checkpoint", 100, 3, [][]int{{0, 2}, {1}},
			[]commit{{100, 10, true}, {102, 30, true}}},
		{"double ack", 0, 2, [][]int{{0, 0}, {1, 1}},
			[]commit{{0, 10, true}, {1, 20, true}}},
		{"nothing acked", 5, 2, [][]int{{}},
			[]commit{{0, 0, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewAckTracker(tc.first)
			for i := 0; i < tc.n; i++ {
				if err := tr.Track(tc.first+uint64(i), int64(i+1)*10); err != nil {
					t.Fatal(err)
				}
			}
			for r, round := range tc.acks {
				for _, a := range round {
					if err := tr.Ack(tc.first + uint64(a)); err != nil {
						t.Fatal(err)
					}
				}
				seq, next, ok := tr.Advance()
				got := commit{seq, next, ok}
				if !ok {
					got = commit{}
				}
				if got != tc.want[r] {
					t.Errorf("round %d: got %+v, want %+v", r, got, tc.want[r])
				}
			}
		})
	}
}

func TestAckTrackerErrors(t *testing.T) {
	tr := NewAckTracker(0)
	if err := tr.Track(1, 1); err == nil {
		t.Error("tracking with a gap: want error")
	}
	if err := tr.Ack(0); err == nil {
		t.Error("acking an untracked record: want error")
	}
}

// TestAckTrackerShuffled acks batches in random order, as concurrent workers
// do, and checks the committed position never passes an unacked record.
func TestAckTrackerShuffled(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tr := NewAckTracker(0)
		const batches, size = 50, 7
		acked := make([]bool, batches*size)
		order := rng.Perm(batches)
		next := uint64(0)
		for _, b := range order {
			// Track lazily up to the batch being acked (the reader is ahead).
			for next < uint64((b+1)*size) {
				if err := tr.Track(next, int64(next+1)); err != nil {
					t.Fatal(err)
				}
				next++
			}
			for i := b * size; i < (b+1)*size; i++ {
				if err := tr.Ack(uint64(i)); err != nil {
					t.Fatal(err)
				}
				acked[i] = true
			}
			seq, off, ok := tr.Advance()
			if !ok {
				continue
			}
			if off != int64(seq+1) {
				t.Fatalf("seed %d: offset %d for seq %d", seed, off, seq)
			}
			for i := uint64(0); i <= seq; i++ {
				if !acked[i] {
					t.Fatalf("seed %d: committed %d past unacked %d", seed, seq, i)
				}
			}
			if int(seq+1) < len(acked) && acked[seq+1] && tr.Pending() > 0 && uint64(len(acked)) > next {
				// seq+1 acked means Advance should have moved further.
				t.Fatalf("seed %d: stopped at %d though %d is acked", seed, seq, seq+1)
			}
		}
		if seq, _, _ := tr.Advance(); tr.Pending() != 0 {
			t.Fatalf("seed %d: %d pending at end (last %d)", seed, tr.Pending(), seq)
		}
	}
}

// An offset tracker takes gaps of any width, with records pending on both
// sides, and commits up to the last acked record of the contiguous prefix.
func TestOffsetAckTrackerWideGaps(t *testing.T) {
	tr := NewOffsetAckTracker(5)
	for _, s := range []uint64{5, 7, 1 << 40, 1<<40 + 1, 1 << 50} {
		if err := tr.Track(s, int64(s%1000)+1); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Track(1<<40, 0); err == nil {
		t.Error("tracking backwards: want an error")
	}
	if err := tr.AckAll([]uint64{7, 1 << 40}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tr.Advance(); ok {
		t.Error("advanced past pending record 5")
	}
	if err := tr.Ack(5); err != nil {
		t.Fatal(err)
	}
	seq, next, ok := tr.Advance()
	if !ok || seq != 1<<40 || next != int64((1<<40)%1000)+1 {
		t.Errorf("advance: %d %d %v, want %d", seq, next, ok, uint64(1<<40))
	}
	if err := tr.Ack(6); err != nil {
		t.Errorf("ack of a committed position: %v", err)
	}
	if err := tr.Ack(1<<40 + 2); err == nil {
		t.Error("ack of a position never tracked: want an error")
	}
	if tr.Pending() != 2 || tr.Next() != 1<<50+1 {
		t.Errorf("pending %d next %d", tr.Pending(), tr.Next())
	}
}

// TestAckTrackerRuns: records tracked in runs (one per batch) commit as far
// as their acks go, whether a run is acked whole or record by record, and
// never past an unacked record of an earlier run.
func TestAckTrackerRuns(t *testing.T) {
	type ack struct {
		first uint64
		n     int
	}
	tests := []struct {
		name    string
		runs    []int // run lengths, from seq 0; record i's next offset is (i+1)*10
		acks    []ack
		want    uint64 // records committed after one Advance
		unacked int
	}{
		{"whole runs in order", []int{3, 2}, []ack{{0, 3}, {3, 2}}, 5, 0},
		{"second run only", []int{3, 2}, []ack{{3, 2}}, 0, 3},
		{"records of a run one by one", []int{4}, []ack{{0, 1}, {1, 1}, {3, 1}}, 2, 1},
		{"a part of a run, then the rest", []int{4, 1}, []ack{{1, 3}, {4, 1}, {0, 1}}, 5, 0},
		{"twice", []int{2, 2}, []ack{{0, 2}, {0, 2}, {2, 1}, {2, 1}}, 3, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewAckTracker(0)
			seq := uint64(0)
			for _, n := range tc.runs {
				nexts := make([]int64, n)
				for i := range nexts {
					nexts[i] = int64(seq+uint64(i)+1) * 10
				}
				if err := tr.TrackRun(seq, nexts); err != nil {
					t.Fatal(err)
				}
				seq += uint64(n)
			}
			for _, a := range tc.acks {
				if err := tr.AckRange(a.first, a.n); err != nil {
					t.Fatal(err)
				}
			}
			last, next, ok := tr.Advance()
			got := uint64(0)
			if ok {
				got = last + 1
				if next != int64(got)*10 {
					t.Errorf("next offset %d, want %d", next, got*10)
				}
			}
			if got != tc.want {
				t.Errorf("committed %d records, want %d", got, tc.want)
			}
			if n := tr.Unacked(); n != tc.unacked {
				t.Errorf("unacked %d, want %d", n, tc.unacked)
			}
			if n := tr.Pending(); n != int(seq-got) {
				t.Errorf("pending %d, want %d", n, seq-got)
			}
		})
	}
	tr := NewAckTracker(0)
	if err := tr.TrackRun(0, []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := tr.AckRange(1, 2); err == nil {
		t.Error("a range past its run's end: want an error")
	}
}

// TestAckTrackerBlock: a block's run commits only as a whole, at the
// offset after its last line, never past an unacked run before it, and
// an ack of part of it is refused rather than taken.
func TestAckTrackerBlock(t *testing.T) {
	tr := NewAckTracker(5)
	if err := tr.TrackBlock(5, 1000, 90000); err != nil {
		t.Fatal(err)
	}
	if err := tr.TrackRun(1005, []int64{90010, 90020}); err != nil {
		t.Fatal(err)
	}
	if err := tr.TrackBlock(1007, 3, 90300); err != nil {
		t.Fatal(err)
	}
	if err := tr.TrackBlock(1009, 1, 1); err == nil {
		t.Error("a block out of order: want an error")
	}
	for _, a := range [][2]int{{5, 1}, {6, 999}, {1007, 2}, {1008, 2}} {
		if err := tr.AckRange(uint64(a[0]), a[1]); err == nil {
			t.Errorf("ack of %d from %d, part of a block: want an error", a[1], a[0])
		}
	}
	if err := tr.AckPart(5, 0, 2); err == nil {
		t.Error("ack of a part of a block's record: want an error")
	}
	if err := tr.AckRange(1007, 3); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tr.Advance(); ok {
		t.Error("committed past the unacked first block")
	}
	if err := tr.AckRange(5, 1000); err != nil {
		t.Fatal(err)
	}
	if last, next, ok := tr.Advance(); !ok || last != 1004 || next != 90000 {
		t.Errorf("advance: %d at %d (%v), want 1004 at 90000", last, next, ok)
	}
	if err := tr.AckRange(1005, 2); err != nil {
		t.Fatal(err)
	}
	if last, next, ok := tr.Advance(); !ok || last != 1009 || next != 90300 {
		t.Errorf("advance: %d at %d (%v), want 1009 at 90300", last, next, ok)
	}
	if tr.Pending() != 0 || tr.Next() != 1010 {
		t.Errorf("pending %d next %d, want 0 and 1010", tr.Pending(), tr.Next())
	}
}
