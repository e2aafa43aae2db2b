package runtime

import (
	"context"
	"time"
)

// FillLinger is how long Fill waits, once its channel first runs empty,
// for more records to arrive before it hands out the batch. A broker
// client delivers one message at a time: without a wait, a route reading
// faster than the messages arrive moves them in batches of one or two,
// each paying a batch's cost through the steps, the sink and the ack
// tracker (an AMQP queue into SQLite moved 17k records/s so, 40–57k with
// the wait). A batch waits at most this long past its first empty look.
const FillLinger = time.Millisecond

// Fill adds to b, through add, the values ch holds and those arriving
// within FillLinger of ch first running empty, until b has max records.
// It stops early when ctx ends, and when ch is closed, which it reports.
// A source fed through a channel calls it once it has its batch's first
// record.
func Fill[T any](ctx context.Context, b *Batch, max int, ch <-chan T, add func(T)) (closed bool) {
	var linger *time.Timer
	for b.Len() < max {
		select {
		case v, ok := <-ch:
			if !ok {
				return true
			}
			add(v)
			continue
		default:
		}
		if linger == nil {
			linger = time.NewTimer(FillLinger)
			defer linger.Stop()
		}
		select {
		case v, ok := <-ch:
			if !ok {
				return true
			}
			add(v)
		case <-linger.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return false
}
