package runtime

import "testing"

// TestAckTrackerParts pins the unnest rule: a record that became n parts is
// committed only once every one of its parts is acked, so one element lost
// (never delivered nor dead-lettered) holds the commit at the record before
// it however many parts and later records were acked.
func TestAckTrackerParts(t *testing.T) {
	tests := []struct {
		name  string
		parts uint32 // record 1 became this many parts
		acked []uint32
		// committed is the commit after acking records 0 and 2 whole and
		// record 1's acked parts: 2 when record 1 is whole, else 0.
		committed uint64
	}{
		{"all parts", 3, []uint32{0, 1, 2}, 2},
		{"all parts, any order and twice", 3, []uint32{2, 0, 2, 1, 0}, 2},
		{"middle part lost", 3, []uint32{0, 2}, 0},
		{"first part lost", 3, []uint32{1, 2}, 0},
		{"last part lost", 3, []uint32{0, 1}, 0},
		{"one part of one", 1, []uint32{0}, 2},
		{"lost past the first bit word", 130, seqTo(129), 0},
		{"all past the first bit word", 130, seqTo(130), 2},
		{"none of many", 130, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewAckTracker(0)
			for i := range 3 {
				if err := tr.Track(uint64(i), int64(i+1)*10); err != nil {
					t.Fatal(err)
				}
			}
			if err := tr.AckAll([]uint64{0, 2}); err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.acked {
				if err := tr.AckPart(1, p, tc.parts); err != nil {
					t.Fatal(err)
				}
			}
			seq, _, ok := tr.Advance()
			if !ok || seq != tc.committed {
				t.Fatalf("committed %d (ok %v), want %d", seq, ok, tc.committed)
			}
			wantUnacked := 0
			if tc.committed == 0 {
				wantUnacked = 1 // record 1, held by its lost part
			}
			if n := tr.Unacked(); n != wantUnacked {
				t.Errorf("unacked = %d, want %d", n, wantUnacked)
			}
		})
	}
}

// TestAckTrackerPartsLateAck: the lost part arriving later (a retry that
// delivered it) releases the commit over the record and every acked one
// after it.
func TestAckTrackerPartsLateAck(t *testing.T) {
	tr := NewAckTracker(7)
	for i := range 4 {
		if err := tr.Track(7+uint64(i), int64(i+1)*10); err != nil {
			t.Fatal(err)
		}
	}
	mustNo := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustNo(tr.Ack(7))
	mustNo(tr.AckPart(8, 0, 2))
	mustNo(tr.Ack(9))
	mustNo(tr.Ack(10))
	if seq, next, ok := tr.Advance(); !ok || seq != 7 || next != 10 {
		t.Fatalf("commit = %d/%d/%v, want 7/10/true: the lost part must hold record 8", seq, next, ok)
	}
	mustNo(tr.AckPart(8, 1, 2))
	if seq, next, ok := tr.Advance(); !ok || seq != 10 || next != 40 {
		t.Fatalf("commit = %d/%d/%v, want 10/40/true", seq, next, ok)
	}
	// A part acked again after the record committed is harmless.
	mustNo(tr.AckPart(8, 1, 2))
}

func TestAckTrackerPartsErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(*AckTracker) error
	}{
		{"part out of range", func(tr *AckTracker) error { return tr.AckPart(0, 3, 3) }},
		{"parts count changes", func(tr *AckTracker) error {
			if err := tr.AckPart(0, 0, 3); err != nil {
				return nil // the first call must succeed; fail the test below
			}
			return tr.AckPart(0, 1, 4)
		}},
		{"never tracked", func(tr *AckTracker) error { return tr.AckPart(5, 0, 2) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewAckTracker(0)
			if err := tr.Track(0, 10); err != nil {
				t.Fatal(err)
			}
			if err := tc.do(tr); err == nil {
				t.Fatal("no error")
			}
			if _, _, ok := tr.Advance(); ok {
				t.Fatal("a refused part ack moved the commit")
			}
		})
	}
}

func seqTo(n uint32) []uint32 {
	s := make([]uint32, n)
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}
