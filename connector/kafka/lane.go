package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A write does not build every record before it sends the first: it hands
// each partition's records, a segment at a time, to that partition's lane,
// a goroutine of the sink that produces them in the order handed while the
// write goes on building. A lane has one request out at a time (so a
// partition's records land in order, across concurrent writes too) and
// gathers every segment queued while its last request was out into the
// next one, up to the message limit: the broker is kept busy while writes
// still encode, and gets full record batches rather than many small ones.
// Concurrent writes (a route's concurrency) share the lanes, so they add
// records to each request rather than requests to the broker.

// kafkaSegmentBytes is how many bytes of a partition's records a write
// gathers before handing them to the lane: small enough that the first
// request leaves early in a large write, large enough that handing over
// costs nothing next to producing.
const kafkaSegmentBytes = 64 << 10

// kafkaLaneQueue bounds the segments waiting for a lane; writes that get
// that far ahead of the broker wait.
const kafkaLaneQueue = 64

// kafkaRequestTimeout bounds one request, its attempts included.
const kafkaRequestTimeout = 2 * time.Minute

// laneSegment is a run of one partition's records of one write (indexes
// into its msgs, in order) and the bytes they add to a record batch, at
// most kafkaMaxBatchRecords.
type laneSegment struct {
	w    *laneWrite
	idx  []int32
	size int
}

// laneWrite is what one Write waits on: its records, the segments it
// handed that are not produced yet, and each partition's first failure.
type laneWrite struct {
	msgs    []kafkaOut
	time    time.Time
	pending sync.WaitGroup

	mu   sync.Mutex
	errs []error // by partition
}

// done marks one of w's segments on partition p produced, or failed.
func (w *laneWrite) done(p int, err error) {
	if err != nil {
		w.mu.Lock()
		if w.errs[p] == nil {
			w.errs[p] = err
		}
		w.mu.Unlock()
	}
	w.pending.Done()
}

// failed says whether a segment of w on partition p failed already: the
// write fails, so its later segments there are not sent (the route writes
// the whole of it again, or stops).
func (w *laneWrite) failed(p int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.errs[p] != nil
}

// partitionLane is one partition's queue of segments.
type partitionLane struct {
	segs chan laneSegment
}

// hand queues seg of w for partition p, starting p's lane on its first
// segment.
func (s *kafkaSink) hand(p int, w *laneWrite, seg laneSegment) {
	seg.w = w
	w.pending.Add(1)
	s.lane(p).segs <- seg
}

func (s *kafkaSink) lane(p int) *partitionLane {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p >= len(s.lanes) {
		s.lanes = append(s.lanes, make([]*partitionLane, p+1-len(s.lanes))...)
	}
	l := s.lanes[p]
	if l == nil {
		l = &partitionLane{segs: make(chan laneSegment, kafkaLaneQueue)}
		s.lanes[p] = l
		s.laneWG.Add(1)
		go s.runLane(p, l)
	}
	return l
}

// closeLanes stops every lane once it has produced what it was handed.
func (s *kafkaSink) closeLanes() {
	s.mu.Lock()
	for _, l := range s.lanes {
		if l != nil {
			close(l.segs)
		}
	}
	s.lanes = nil
	s.mu.Unlock()
	s.laneWG.Wait()
}

// runLane is partition p's lane: take the next segment, add those queued
// behind it while the request stays under the message limit, produce
// (acknowledged before the next request goes), and again until the queue
// is closed.
func (s *kafkaSink) runLane(p int, l *partitionLane) {
	defer s.laneWG.Done()
	var req []laneSegment
	var carry *laneSegment
	var batch []byte // the encoded request, reused while requests succeed
	for {
		req = req[:0]
		size := 0
		if carry != nil {
			req, size, carry = append(req, *carry), carry.size, nil
		} else {
			seg, ok := <-l.segs
			if !ok {
				return
			}
			req, size = append(req, seg), seg.size
		}
	gather:
		for size < kafkaMaxBatchRecords {
			select {
			case seg, ok := <-l.segs:
				if !ok {
					break gather
				}
				if size+seg.size > kafkaMaxBatchRecords {
					carry = &seg
					break gather
				}
				req, size = append(req, seg), size+seg.size
			default:
				break gather
			}
		}
		live := req[:0]
		for _, seg := range req {
			if seg.w.failed(p) {
				seg.w.done(p, nil)
			} else {
				live = append(live, seg)
			}
		}
		if len(live) == 0 {
			continue
		}
		batch = appendRecordSet(batch[:0], live)
		ctx, cancel := context.WithTimeout(context.Background(), kafkaRequestTimeout)
		err := s.produceBatch(ctx, p, batch)
		cancel()
		if err != nil {
			err = fmt.Errorf("partition %d: %w", p, err)
			batch = nil // a request given up on may still be sending from it
		}
		for _, seg := range live {
			seg.w.done(p, err)
		}
	}
}
