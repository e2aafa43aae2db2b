package runtime

import (
	"fmt"
	"sync"
)

// source, sourceHost, resumingSource, finiteSource, progressSource and
// ackPos are the engine's names for Source, SourceHost, ResumingSource,
// FiniteSource, ProgressSource and AckPos (connector.go, where the
// contract a source keeps is written down).
type (
	source         = Source
	sourceHost     = SourceHost
	resumingSource = ResumingSource
	finiteSource   = FiniteSource
	progressSource = ProgressSource
	ackPos         = AckPos
)

// ackRef names one tracked record: its partition, the generation of the
// partition's assignment it was read under, and its Seq; kid and kids
// name one of the records an unnest made of it (kids 0: the record itself).
type ackRef struct {
	part      int32
	gen       uint32
	seq       uint64
	kid, kids uint32
}

func refOf(r *Record) ackRef {
	return ackRef{part: r.Partition, gen: r.gen, seq: r.Seq, kid: r.kid, kids: r.kids}
}

// partitionAcks keeps one AckTracker per partition. A partition starts
// being tracked with its first record; a record of a newer generation
// (the partition was revoked and assigned again) starts it afresh, and an
// ack from an older generation is ignored.
type partitionAcks struct {
	mu        sync.Mutex
	parts     map[int32]*partitionAck
	committed map[int32]ackPos // last committed position of every partition seen
	gaps      bool             // Seq is an offset that may skip
	nexts     []int64          // track's scratch
}

type partitionAck struct {
	gen uint32
	t   *AckTracker
}

func newPartitionAcks(gaps bool) *partitionAcks {
	return &partitionAcks{parts: map[int32]*partitionAck{}, committed: map[int32]ackPos{}, gaps: gaps}
}

func (p *partitionAcks) newTracker(first uint64) *AckTracker {
	if p.gaps {
		return NewOffsetAckTracker(first)
	}
	return NewAckTracker(first)
}

// start begins tracking partition part at seq first (used to seed the
// committed position of a source resuming from a checkpoint).
func (p *partitionAcks) start(part int32, gen uint32, first uint64, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parts[part] = &partitionAck{gen: gen, t: p.newTracker(first)}
	p.committed[part] = ackPos{Next: first, Offset: offset, Gen: gen}
}

// ackSpan is a run of a batch's records tracked as one (AckTracker.TrackRun):
// consecutive positions of one partition read under one generation. A
// batch whose records all end acked is acked span by span, one step each.
type ackSpan struct {
	part  int32
	gen   uint32
	first uint64
	n     int
}

// track registers the records of b in read order, as runs of consecutive
// positions, and keeps the runs in b.spans.
func (p *partitionAcks) track(b *batch) error {
	recs := b.recs
	b.spans = b.spans[:0]
	p.mu.Lock()
	defer p.mu.Unlock()
	if b.blockLines > 0 { // one run, partition 0 (a BlockSource has one)
		pa := p.parts[0]
		if pa == nil || pa.gen != 0 {
			pa = &partitionAck{t: p.newTracker(b.blockFirst)}
			p.parts[0] = pa
		}
		if err := pa.t.TrackBlock(b.blockFirst, b.blockLines, b.blockNext); err != nil {
			return fmt.Errorf("partition 0: %w", err)
		}
		b.spans = append(b.spans, ackSpan{first: b.blockFirst, n: b.blockLines})
		return nil
	}
	for i := 0; i < len(recs); {
		r := &recs[i]
		j := i + 1
		for j < len(recs) && recs[j].Partition == r.Partition && recs[j].gen == r.gen && recs[j].Seq == recs[j-1].Seq+1 {
			j++
		}
		pa := p.parts[r.Partition]
		if pa == nil || pa.gen != r.gen {
			pa = &partitionAck{gen: r.gen, t: p.newTracker(r.Seq)}
			p.parts[r.Partition] = pa
		}
		nexts := p.nexts[:0]
		for k := i; k < j; k++ {
			nexts = append(nexts, recs[k].Next)
		}
		p.nexts = nexts
		if err := pa.t.TrackRun(r.Seq, nexts); err != nil {
			return fmt.Errorf("partition %d: %w", r.Partition, err)
		}
		b.spans = append(b.spans, ackSpan{part: r.Partition, gen: r.gen, first: r.Seq, n: j - i})
		i = j
	}
	return nil
}

// ackSpans acks every record of the runs spans name.
func (p *partitionAcks) ackSpans(spans []ackSpan) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range spans {
		pa := p.parts[s.part]
		if pa == nil || pa.gen != s.gen {
			continue // revoked since it was read: its position is no longer ours
		}
		if err := pa.t.AckRange(s.first, s.n); err != nil {
			return fmt.Errorf("partition %d: %w", s.part, err)
		}
	}
	return nil
}

// ack acks the records refs names.
func (p *partitionAcks) ack(refs []ackRef) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last *partitionAck
	lastPart := int32(-1)
	for _, ref := range refs {
		pa := last
		if last == nil || ref.part != lastPart {
			pa = p.parts[ref.part]
			last, lastPart = pa, ref.part
		}
		if pa == nil || pa.gen != ref.gen {
			continue // revoked since it was read: its position is no longer ours
		}
		if err := pa.t.AckPart(ref.seq, ref.kid, ref.kids); err != nil {
			return fmt.Errorf("partition %d: %w", ref.part, err)
		}
	}
	return nil
}

// advance moves every partition over its contiguous acked prefix and
// returns the partitions that moved and the committed position of all.
func (p *partitionAcks) advance() (changed, all map[int32]ackPos) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for part, pa := range p.parts {
		seq, next, ok := pa.t.Advance()
		if !ok {
			continue
		}
		if changed == nil {
			changed = map[int32]ackPos{}
		}
		pos := ackPos{Next: seq + 1, Offset: next, Gen: pa.gen}
		changed[part] = pos
		p.committed[part] = pos
	}
	if changed == nil {
		return nil, nil
	}
	all = make(map[int32]ackPos, len(p.committed))
	for k, v := range p.committed {
		all[k] = v
	}
	return changed, all
}

// drop stops tracking parts.
func (p *partitionAcks) drop(parts []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range parts {
		delete(p.parts, part)
		delete(p.committed, part)
	}
}

// pending is the number of records tracked and not yet committed, in parts
// (every partition when parts is nil).
func (p *partitionAcks) pending(parts []int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	if parts == nil {
		for _, pa := range p.parts {
			n += pa.t.Pending()
		}
		return n
	}
	for _, part := range parts {
		if pa := p.parts[part]; pa != nil {
			n += pa.t.Pending()
		}
	}
	return n
}

// unacked is the number of records tracked in parts and not acked yet
// (an acked record waiting behind an unacked one does not count).
func (p *partitionAcks) unacked(parts []int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, part := range parts {
		if pa := p.parts[part]; pa != nil {
			n += pa.t.Unacked()
		}
	}
	return n
}

// committedRecords sums the committed next positions over partitions: for
// a single-partition source, the number of leading records committed.
func (p *partitionAcks) committedRecords() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for _, c := range p.committed {
		n += int64(c.Next)
	}
	return n
}
