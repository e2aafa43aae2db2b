// Package brokersrc holds what the sources of brokers that keep the
// route's position themselves (amqp, mqtt, nats) share: the messages read
// and not yet acknowledged, in read order, of which a commit takes the
// prefix the route has committed; and the reading of a producer-stamped
// message id.
package brokersrc

import (
	"sync"

	"github.com/google/uuid"
)

// Unacked is the messages a source has handed out and not yet
// acknowledged, by Seq: the i-th pushed has Seq i. It is safe for
// concurrent use (Next pushes, Commit takes).
type Unacked[T any] struct {
	mu    sync.Mutex
	base  uint64 // Seq of items[0]
	items []T
}

// Push adds the message of the next Seq.
func (u *Unacked[T]) Push(m T) {
	u.mu.Lock()
	u.items = append(u.items, m)
	u.mu.Unlock()
}

// Take removes and returns, in read order, the messages before next: the
// route's committed position (AckPos.Next), each of them delivered,
// dead-lettered, filtered or found a duplicate.
func (u *Unacked[T]) Take(next uint64) []T {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := min(max(int(int64(next-u.base)), 0), len(u.items))
	out := u.items[:n:n]
	u.items = u.items[n:]
	u.base += uint64(n)
	return out
}

// MessageID turns a producer's id, v, into the record's message_id: v
// itself when it is a UUID, else a name-based UUID of v in space, the
// same on every redelivery. ok is false when v is empty (no id: the
// record's is minted per read).
func MessageID(space uuid.UUID, v string) (id uuid.UUID, ok bool) {
	if v == "" {
		return uuid.UUID{}, false
	}
	if id, err := uuid.Parse(v); err == nil {
		return id, true
	}
	return uuid.NewSHA1(space, []byte(v)), true
}
