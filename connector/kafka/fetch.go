package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	fetchAPI "github.com/segmentio/kafka-go/protocol/fetch"

	"github.com/mqb-dev/mqb/plan"
)

// A partition is read with Fetch requests of kafka-go's protocol layer at
// the read_committed isolation level, not with its Reader. A topic written
// by a transactional producer (Kafka Streams or Flink exactly-once, Kafka
// Connect's exactly-once sources, a Debezium connector) holds two kinds of
// records a reader must not hand on: the commit and abort markers (control
// batches), and the records of transactions that were aborted, which a
// read_committed broker still sends, listing the aborted transactions
// beside them for the client to drop. kafka-go's Reader does neither: it
// handed the markers on as records (a JSON route dead-lettered or stopped
// on them) and the aborted records too, records the producer took back
// and most often wrote again in its next transaction.
//
// read_committed also keeps back everything from the first record of a
// transaction still open (the partition's last stable offset), so a
// record is read only once its transaction committed.

const (
	// kafkaFetchMaxBytes bounds one answer (and one partition's part of it).
	kafkaFetchMaxBytes = 8 << 20
	// kafkaFetchMaxWait is how long the broker holds a fetch that finds
	// nothing new.
	kafkaFetchMaxWait = 250 * time.Millisecond
	// kafkaFetchTimeout bounds one fetch's round trip.
	kafkaFetchTimeout = 30 * time.Second
	// readCommitted is the Fetch request's isolation level for it.
	readCommitted = 1
	// controlAbort is the type of an abort marker's control record.
	controlAbort = 0
)

// fetch reads partition part from offset into s.msgs until ctx ends. One
// goroutine fetches while another hands the records on, so the next round
// trip overlaps the route taking them.
func (s *kafkaSource) fetch(ctx context.Context, part int, offset int64, gen uint32) {
	tr := s.sec.transport()
	defer tr.CloseIdleConnections()
	offset, err := s.startOffset(ctx, part, offset)
	if err != nil {
		s.fatal(err)
		return
	}
	if ctx.Err() != nil {
		return
	}
	chunks := make(chan []kafkago.Message, 4)
	go func() {
		defer close(chunks)
		s.fetchLoop(ctx, tr, part, offset, chunks)
	}()
	for c := range chunks {
		for _, m := range c {
			select {
			case s.msgs <- kafkaMsg{m: m, gen: gen}:
			case <-ctx.Done():
				for range chunks {
				}
				return
			}
		}
	}
}

// startOffset is the offset reading starts at: offset itself, checked to
// be in the partition (checkOffset), or, for kafkago.FirstOffset and
// kafkago.LastOffset, the partition's first or the one after its last.
func (s *kafkaSource) startOffset(ctx context.Context, part int, offset int64) (int64, error) {
	if offset >= 0 {
		return offset, s.checkOffset(ctx, part, offset)
	}
	first, last, err := s.waitBounds(ctx, part)
	if err != nil || ctx.Err() != nil {
		return 0, err
	}
	if offset == kafkago.LastOffset {
		return last, nil
	}
	if s.groupID != "" && first > 0 {
		// Only a group starts a partition at FirstOffset once the route
		// has run: the group has no committed offset for it.
		s.log.Warn("kafka source: the consumer group has no committed offset for the partition; reading from the first offset the topic keeps. "+
			"If the group read this partition before, its offsets expired (the broker's offsets.retention.minutes, 7 days by default, counted from when the group emptied) and records the topic deleted before this offset were never read",
			"group_id", s.groupID, "topic", s.topic, "partition", part, "first_offset", first)
	}
	return first, nil
}

// fetchLoop sends partition part's records, from offset on, in chunks
// until ctx ends or the partition cannot be read on (then the route
// stops).
func (s *kafkaSource) fetchLoop(ctx context.Context, tr *kafkago.Transport, part int, offset int64, chunks chan<- []kafkago.Message) {
	addr := kafkago.TCP(s.brokers...)
	emit := func(c []kafkago.Message) bool {
		select {
		case chunks <- c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	wait, failures := 250*time.Millisecond, 0
	var heldSince time.Time // since when an open transaction holds the partition back
	var heldSaid bool
	for ctx.Err() == nil {
		a, err := s.fetchOnce(ctx, tr, addr, part, offset, emit)
		next := a.next
		var kerr kafkago.Error
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &kerr) && kerr == kafkago.OffsetOutOfRange:
			s.fatal(s.outOfRange(ctx, part, offset))
			return
		case errors.As(err, &kerr) && !kerr.Temporary():
			s.fatal(fmt.Errorf("route %s: kafka source topic %s partition %d: fetch at offset %d: %w", s.route, s.topic, part, offset, err))
			return
		case err != nil && next > offset:
			// A batch the answer held could not be read: the records
			// before it were handed on; ask again from there.
			s.log.Warn("kafka source: reading a fetched batch failed, fetching again", "partition", part, "offset", next, "err", err.Error())
			offset = next
			continue
		case err != nil:
			// A broker restarting, a leader moving: kafka-go's transport
			// finds the leader again once its cached metadata is gone.
			failures++
			if failures == 1 || failures%10 == 0 {
				s.log.Warn("kafka source: fetch failed, retrying", "partition", part, "offset", offset, "attempt", failures, "err", plan.RedactURLs(err.Error()))
			}
			tr.CloseIdleConnections()
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 2*time.Second)
			continue
		}
		wait, failures = 250*time.Millisecond, 0
		switch {
		case !a.held:
			heldSince, heldSaid = time.Time{}, false
		case heldSince.IsZero():
			heldSince = time.Now()
		case !heldSaid && time.Since(heldSince) > kafkaHeldWarn:
			heldSaid = true
			s.log.Warn("kafka source: the partition's records past this offset belong to a transaction still open, which read_committed waits for (a producer that died inside a transaction holds it until the transaction times out)",
				"partition", part, "offset", offset, "last_stable_offset", a.lastStable, "high_watermark", a.highWatermark, "waiting", time.Since(heldSince).Round(time.Second).String())
		}
		if next <= offset && a.stuck {
			// The answer brought no record, though the partition has some
			// past offset: its next batch holds none (emptied by
			// compaction) and names no offset after it. The next batch
			// written moves past it; do not ask again at once.
			select {
			case <-ctx.Done():
				return
			case <-time.After(kafkaFetchMaxWait):
			}
		}
		offset = max(offset, next)
	}
}

// answer is what a fetch says of its partition besides its records.
type answer struct {
	next int64 // the offset after the answer's last record, handed on or dropped
	// stuck: no record, while the last stable offset is past the offset
	// asked for; held: no record, while records past it wait behind a
	// transaction still open (the last stable offset is at it, the high
	// watermark past it).
	stuck, held               bool
	lastStable, highWatermark int64
}

// kafkaHeldWarn is how long an open transaction may hold a partition back
// before the source says so (a variable for the tests).
var kafkaHeldWarn = time.Minute

// fetchOnce sends one Fetch request for partition part at offset and
// hands the records its answer holds to emit.
func (s *kafkaSource) fetchOnce(ctx context.Context, tr *kafkago.Transport, addr net.Addr, part int, offset int64, emit func([]kafkago.Message) bool) (answer, error) {
	rctx, cancel := context.WithTimeout(ctx, kafkaFetchTimeout)
	defer cancel()
	res, err := tr.RoundTrip(rctx, addr, &fetchAPI.Request{
		ReplicaID:      -1,
		MaxWaitTime:    int32(kafkaFetchMaxWait.Milliseconds()),
		MinBytes:       1,
		MaxBytes:       kafkaFetchMaxBytes,
		IsolationLevel: readCommitted,
		SessionID:      -1,
		SessionEpoch:   -1,
		Topics: []fetchAPI.RequestTopic{{
			Topic: s.topic,
			Partitions: []fetchAPI.RequestPartition{{
				Partition:          int32(part),
				CurrentLeaderEpoch: -1,
				FetchOffset:        offset,
				LogStartOffset:     -1,
				PartitionMaxBytes:  kafkaFetchMaxBytes,
			}},
		}},
	})
	if err != nil {
		return answer{next: offset}, err
	}
	r, ok := res.(*fetchAPI.Response)
	if !ok {
		return answer{next: offset}, fmt.Errorf("unexpected answer %T to a fetch", res)
	}
	for _, t := range r.Topics {
		if t.Topic != s.topic {
			continue
		}
		for i := range t.Partitions {
			p := &t.Partitions[i]
			if int(p.Partition) != part {
				continue
			}
			if p.ErrorCode != 0 {
				return answer{next: offset}, kafkago.Error(p.ErrorCode)
			}
			next, err := s.committedRecords(part, offset, p, emit)
			none := next <= offset
			return answer{next: next, lastStable: p.LastStableOffset, highWatermark: p.HighWatermark,
				stuck: none && p.LastStableOffset > offset,
				held:  none && p.LastStableOffset >= 0 && p.LastStableOffset <= offset && p.HighWatermark > offset}, err
		}
	}
	return answer{next: offset}, fmt.Errorf("the broker's answer to a fetch has no partition %d", part)
}

// kafkaChunkRecords is how many records go to the route together: an
// answer of up to kafkaFetchMaxBytes is handed on in chunks as it is
// read, each with one arena for its keys and values.
const (
	kafkaChunkRecords = 512
	kafkaArenaBytes   = 128 << 10
)

// committedRecords reads the record batches of one partition's answer,
// dropping the control batches and the batches of aborted transactions
// as a read_committed consumer must: the answer lists each aborted
// transaction that overlaps it by producer id and first offset; from
// that offset on, that producer's transactional batches are aborted
// until its abort marker. The records to hand on go to emit in chunks;
// it returns the offset after the last record the answer held, dropped
// or not.
func (s *kafkaSource) committedRecords(part int, from int64, p *fetchAPI.ResponsePartition, emit func([]kafkago.Message) bool) (int64, error) {
	next := from
	if p.RecordSet.Records == nil {
		return next, nil
	}
	aborted := append([]fetchAPI.ResponseTransaction(nil), p.AbortedTransactions...)
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].FirstOffset < aborted[j].FirstOffset })
	abortedBy := map[int64]bool{} // producers whose open transaction here was aborted
	batches := []protocol.RecordReader{p.RecordSet.Records}
	if st, ok := p.RecordSet.Records.(*protocol.RecordStream); ok {
		batches = st.Records
	}
	var c chunk
	for _, b := range batches {
		var (
			base, producer int64
			attrs          protocol.Attributes
			records        protocol.RecordReader = b
			control        bool
		)
		switch v := b.(type) {
		case *protocol.ControlBatch:
			base, producer, attrs, records, control = v.BaseOffset, v.ProducerID, v.Attributes, v.Records, true
		case *protocol.RecordBatch:
			base, producer, attrs, records = v.BaseOffset, v.ProducerID, v.Attributes, v.Records
		case *protocol.MessageSet:
			base, attrs, records = v.BaseOffset, v.Attributes, v.Records
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= base {
			abortedBy[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		drop := attrs.Transactional() && abortedBy[producer]
		for {
			rec, err := records.ReadRecord()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return next, fmt.Errorf("partition %d: reading the batch at offset %d: %w", part, base, err)
			}
			next = max(next, rec.Offset+1)
			if control {
				if cr, err := protocol.ReadControlRecord(rec); err == nil && cr.Type == controlAbort {
					delete(abortedBy, producer)
				}
				continue
			}
			if drop || rec.Offset < from {
				closeRecord(rec)
				continue
			}
			if err := c.add(s.topic, part, rec); err != nil {
				return next, fmt.Errorf("partition %d offset %d: %w", part, rec.Offset, err)
			}
			if len(c.msgs) == kafkaChunkRecords {
				if !emit(c.msgs) {
					return next, nil
				}
				c = chunk{}
			}
		}
	}
	if len(c.msgs) > 0 {
		emit(c.msgs)
	}
	return next, nil
}

// chunk gathers records as kafka-go Messages, as its Reader built them
// (a null key or value stays nil), their keys and values copied into
// shared arenas rather than one allocation each.
type chunk struct {
	msgs  []kafkago.Message
	arena []byte
}

func (c *chunk) add(topic string, part int, rec *protocol.Record) error {
	defer closeRecord(rec)
	if c.msgs == nil {
		c.msgs = make([]kafkago.Message, 0, kafkaChunkRecords)
	}
	key, err := c.copyOf(rec.Key)
	if err != nil {
		return err
	}
	value, err := c.copyOf(rec.Value)
	if err != nil {
		return err
	}
	c.msgs = append(c.msgs, kafkago.Message{
		Topic:     topic,
		Partition: part,
		Offset:    rec.Offset,
		Key:       key,
		Value:     value,
		Headers:   rec.Headers,
		Time:      rec.Time,
	})
	return nil
}

// copyOf reads b into the arena; nil stays nil.
func (c *chunk) copyOf(b protocol.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	n := b.Len()
	if cap(c.arena)-len(c.arena) < n {
		c.arena = make([]byte, 0, max(kafkaArenaBytes, n))
	}
	start := len(c.arena)
	c.arena = c.arena[:start+n]
	if _, err := io.ReadFull(b, c.arena[start:]); err != nil {
		return nil, err
	}
	return c.arena[start : start+n : start+n], nil
}

// closeRecord gives back the pages a record's key and value hold.
func closeRecord(rec *protocol.Record) {
	if rec.Key != nil {
		rec.Key.Close()
	}
	if rec.Value != nil {
		rec.Value.Close()
	}
}
