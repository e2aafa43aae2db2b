package kafka

import (
	"context"
	"time"
)

// A write does not build every record before it sends the first: it hands
// each partition's records, a segment at a time, to that partition's lane,
// a goroutine that produces them in the order handed while the write goes
// on building. A lane sends one request at a time (so a partition's records
// land in order) and gathers every segment that arrived while its last
// request was out into the next one, up to the message limit: the broker
// is kept busy while the write still encodes, and a busy broker gets full
// record batches rather than many small ones.

// kafkaSegmentBytes is how many bytes of a partition's records a write
// gathers before handing them to the lane: small enough that the first
// request leaves early in a large write, large enough that handing over
// costs nothing next to producing.
const kafkaSegmentBytes = 64 << 10

// kafkaLaneQueue bounds the segments waiting for a lane; a write that gets
// that far ahead of the broker waits.
const kafkaLaneQueue = 64

// laneSegment is a run of one partition's records (indexes into the
// write's msgs, in order) and the bytes they add to a record batch.
type laneSegment struct {
	idx  []int32
	size int
}

// laneWrite is one Write's lanes.
type laneWrite struct {
	sink  *kafkaSink
	ctx   context.Context
	msgs  []kafkaOut
	time  time.Time
	lanes []*partitionLane // by partition; nil until its first segment
}

// partitionLane produces one partition's segments of a write, in order.
type partitionLane struct {
	segs chan laneSegment
	done chan struct{}
	err  error // the first failure; later segments are not sent
}

// hand queues seg for partition p, starting p's lane on its first segment.
func (w *laneWrite) hand(p int, seg laneSegment) {
	l := w.lanes[p]
	if l == nil {
		l = &partitionLane{segs: make(chan laneSegment, kafkaLaneQueue), done: make(chan struct{})}
		w.lanes[p] = l
		go w.run(p, l)
	}
	l.segs <- seg
}

// wait closes every lane's queue and returns each partition's error once
// its lane has produced all it was handed.
func (w *laneWrite) wait() []error {
	for _, l := range w.lanes {
		if l != nil {
			close(l.segs)
		}
	}
	errs := make([]error, len(w.lanes))
	for p, l := range w.lanes {
		if l != nil {
			<-l.done
			errs[p] = l.err
		}
	}
	return errs
}

// run is partition p's lane: take the next segment, add those queued
// behind it while the request stays under the message limit, produce
// (acknowledged before the next request goes), and again until the queue
// is closed and empty. After a failure it drains the queue unsent: the
// write fails, and the whole of it is written again or not at all.
func (w *laneWrite) run(p int, l *partitionLane) {
	defer close(l.done)
	var carry *laneSegment
	for {
		var req laneSegment
		if carry != nil {
			req, carry = *carry, nil
		} else {
			seg, ok := <-l.segs
			if !ok {
				return
			}
			req = seg
		}
	gather:
		for req.size < kafkaMaxMessageBytes-kafkaBatchOverhead {
			select {
			case seg, ok := <-l.segs:
				if !ok {
					break gather
				}
				if req.size+seg.size > kafkaMaxMessageBytes-kafkaBatchOverhead {
					carry = &seg
					break gather
				}
				req.idx = append(req.idx, seg.idx...)
				req.size += seg.size
			default:
				break gather
			}
		}
		if l.err == nil {
			l.err = w.sink.produce(w.ctx, p, w.msgs, req.idx, w.time)
		}
	}
}
