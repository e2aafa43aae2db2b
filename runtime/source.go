package runtime

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// source is what a route reads from. The route's reader goroutine is the
// only caller of next; commit is called by the committer goroutine, after
// the positions it reports are durable in the checkpoint store (when the
// source keeps one there).
//
// A source may be partitioned: each record carries a Partition and, within
// it, a Seq that grows with every record (a file's record index, a Kafka
// offset). Acks are tracked per partition and only the contiguous acked
// prefix of each partition is ever committed.
type source interface {
	// open positions the source at cp (haveCP false: nothing committed
	// yet). host lets a source whose partitions come and go (a consumer
	// group rebalancing) flush them. A source cancelled while waiting to
	// open returns nil; the route then sees ctx done and ends.
	open(ctx context.Context, cp checkpoint.Position, haveCP bool, host sourceHost) error
	// next reads the next batch, at most max records. eof is true when a
	// finite source has nothing more; an endless one returns an empty
	// batch when ctx is done.
	next(ctx context.Context, max int) (b *batch, eof bool, err error)
	// position turns the committed positions of every partition into what
	// the checkpoint store keeps. ok false: the source keeps no checkpoint
	// of its own (its broker holds the position).
	position(committed map[int32]ackPos) (pos checkpoint.Position, ok bool)
	// commit hands the source the positions that moved since the last
	// commit, once they are durable in the checkpoint store: a consumer
	// group commits its offsets here, a JetStream consumer acks.
	commit(ctx context.Context, changed map[int32]ackPos) error
	close() error

	// sourceName is a short name safe in a part name.
	sourceName() string
	// replayable reports whether a re-read yields the same records at the
	// same positions (name_by = source_position relies on it).
	replayable() bool
	// recordFormat is how payloads decode: json, text or raw.
	recordFormat() string
	// seqGaps reports whether Seq is an offset that may skip positions.
	seqGaps() bool
}

// sourceHost is what a route offers its source.
type sourceHost interface {
	// revoke is called when partitions stop being the source's (a
	// rebalance): it waits up to wait for the records already read from
	// them to be acked, commits their contiguous acked position through
	// the source's commit, and stops tracking them, so an ack arriving
	// later is ignored and nothing is committed for them twice.
	revoke(parts []int32, wait time.Duration) error
}

// resumingSource is a source that knows, once open, the committed
// position of its partitions: tracking starts there, and the route's
// Committed count with it.
type resumingSource interface {
	resumeAt() map[int32]ackPos
}

// finiteSource is a source that may end: read to the end, its route
// stops by itself. finite reports whether this one will.
type finiteSource interface {
	finite() bool
}

// progressSource is a source that can tell how far through its input it is.
type progressSource interface {
	progress() (read, size int64, ok bool)
}

// ackPos is a committed position in one partition.
type ackPos struct {
	// next is the Seq of the first record not committed: a file's next
	// record index, a Kafka partition's next offset.
	next uint64
	// offset is the source offset just after the last committed record
	// (a file's byte offset).
	offset int64
	// gen is the generation of the partition's assignment the position
	// was reached under: a source whose partitions move between consumers
	// commits only positions of the generation it holds.
	gen uint32
}

// ackRef names one tracked record: its partition, the generation of the
// partition's assignment it was read under, and its Seq.
type ackRef struct {
	part int32
	gen  uint32
	seq  uint64
}

func refOf(r *Record) ackRef { return ackRef{part: r.Partition, gen: r.gen, seq: r.Seq} }

// partitionAcks keeps one AckTracker per partition. A partition starts
// being tracked with its first record; a record of a newer generation
// (the partition was revoked and assigned again) starts it afresh, and an
// ack from an older generation is ignored.
type partitionAcks struct {
	mu        sync.Mutex
	parts     map[int32]*partitionAck
	committed map[int32]ackPos // last committed position of every partition seen
	gaps      bool             // Seq is an offset that may skip
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
	p.committed[part] = ackPos{next: first, offset: offset, gen: gen}
}

// track registers the records of b in read order.
func (p *partitionAcks) track(recs []Record) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last *partitionAck
	lastPart := int32(-1)
	for i := range recs {
		r := &recs[i]
		pa := last
		if last == nil || r.Partition != lastPart {
			pa = p.parts[r.Partition]
			if pa == nil || pa.gen != r.gen {
				pa = &partitionAck{gen: r.gen, t: p.newTracker(r.Seq)}
				p.parts[r.Partition] = pa
			}
			last, lastPart = pa, r.Partition
		}
		if err := pa.t.Track(r.Seq, r.Next); err != nil {
			return fmt.Errorf("partition %d: %w", r.Partition, err)
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
		if err := pa.t.Ack(ref.seq); err != nil {
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
		pos := ackPos{next: seq + 1, offset: next, gen: pa.gen}
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
		n += int64(c.next)
	}
	return n
}
