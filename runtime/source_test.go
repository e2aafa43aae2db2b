package runtime

import "testing"

func TestPartitionAcks(t *testing.T) {
	p := newPartitionAcks(true)
	p.start(0, 1, 10, 10)
	recs := []Record{
		{Partition: 0, Seq: 10, Next: 11, gen: 1},
		{Partition: 1, Seq: 5, Next: 6, gen: 1},
		{Partition: 0, Seq: 12, Next: 13, gen: 1}, // offset 11 skipped (compacted)
		{Partition: 1, Seq: 6, Next: 7, gen: 1},
	}
	if err := p.track(&batch{recs: recs}); err != nil {
		t.Fatal(err)
	}
	// Partition 0: 12 acked, 10 not: nothing committable there yet.
	if err := p.ack([]ackRef{refOf(&recs[2]), refOf(&recs[1])}); err != nil {
		t.Fatal(err)
	}
	changed, all := p.advance()
	if len(changed) != 1 || changed[1] != (ackPos{Next: 6, Offset: 6, Gen: 1}) {
		t.Fatalf("changed %v, want partition 1 at 6", changed)
	}
	if all[0] != (ackPos{Next: 10, Offset: 10, Gen: 1}) {
		t.Fatalf("partition 0 committed %v, want its resumed position 10", all[0])
	}
	// 10 acked: the gap at 11 counts as acked, so 0 commits through 12.
	if err := p.ack([]ackRef{refOf(&recs[0])}); err != nil {
		t.Fatal(err)
	}
	if changed, _ = p.advance(); changed[0] != (ackPos{Next: 13, Offset: 13, Gen: 1}) {
		t.Fatalf("changed %v, want partition 0 at 13", changed)
	}
	// Partition 1 is revoked and comes back under generation 2 at 6: the
	// old generation's ack of 6 is ignored, the new one's counts.
	p.drop([]int32{1})
	again := []Record{{Partition: 1, Seq: 6, Next: 7, gen: 2}}
	if err := p.track(&batch{recs: again}); err != nil {
		t.Fatal(err)
	}
	if err := p.ack([]ackRef{refOf(&recs[3])}); err != nil {
		t.Fatal(err)
	}
	if changed, _ = p.advance(); changed != nil {
		t.Fatalf("a stale ack moved %v", changed)
	}
	if n := p.unacked([]int32{1}); n != 1 {
		t.Fatalf("unacked %d, want 1", n)
	}
	if err := p.ack([]ackRef{refOf(&again[0])}); err != nil {
		t.Fatal(err)
	}
	if changed, _ = p.advance(); changed[1] != (ackPos{Next: 7, Offset: 7, Gen: 2}) {
		t.Fatalf("changed %v, want partition 1 at 7 under generation 2", changed)
	}
}

// TestPartitionAcksSpans: a read batch is tracked as runs of consecutive
// positions per partition, and acking its spans acks every record in them,
// with the commit never passing a record of an earlier batch still unacked.
func TestPartitionAcksSpans(t *testing.T) {
	rec := func(part int32, seq uint64) Record {
		return Record{Partition: part, Seq: seq, Next: int64(seq) + 1}
	}
	tests := []struct {
		name      string
		gaps      bool
		batches   [][]Record
		ackOrder  []int // batches acked whole, in this order
		wantSpans []int // spans tracked per batch
		want      map[int32]uint64
	}{
		{"one run per batch", false,
			[][]Record{{rec(0, 0), rec(0, 1), rec(0, 2)}, {rec(0, 3), rec(0, 4)}},
			[]int{0, 1}, []int{1, 1}, map[int32]uint64{0: 5}},
		{"later batch acked first holds", false,
			[][]Record{{rec(0, 0), rec(0, 1)}, {rec(0, 2), rec(0, 3)}},
			[]int{1}, []int{1, 1}, map[int32]uint64{}},
		{"offsets with a gap cut the run", true,
			[][]Record{{rec(0, 0), rec(0, 1), rec(0, 5), rec(0, 6)}},
			[]int{0}, []int{2}, map[int32]uint64{0: 7}},
		{"partitions interleaved", true,
			[][]Record{{rec(0, 0), rec(0, 1), rec(1, 0), rec(0, 2), rec(1, 1)}},
			[]int{0}, []int{4}, map[int32]uint64{0: 3, 1: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPartitionAcks(tc.gaps)
			bs := make([]*batch, len(tc.batches))
			for i, recs := range tc.batches {
				bs[i] = &batch{recs: recs}
				if err := p.track(bs[i]); err != nil {
					t.Fatal(err)
				}
				if len(bs[i].spans) != tc.wantSpans[i] {
					t.Fatalf("batch %d: %d spans, want %d", i, len(bs[i].spans), tc.wantSpans[i])
				}
			}
			for _, i := range tc.ackOrder {
				if err := p.ackSpans(bs[i].spans); err != nil {
					t.Fatal(err)
				}
			}
			changed, _ := p.advance()
			if len(changed) != len(tc.want) {
				t.Fatalf("changed %v, want next %v", changed, tc.want)
			}
			for part, next := range tc.want {
				if got := changed[part]; got.Next != next || got.Offset != int64(next) {
					t.Errorf("partition %d at %+v, want next %d", part, got, next)
				}
			}
		})
	}
}
