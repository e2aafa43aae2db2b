package mqtt

import "sync"

// inbox queues the messages the client receives, in order, without ever
// making the client wait. The client reads the connection on one
// goroutine and hands each message to the source on it: had that hand-off
// waited for the route to read (as a channel send does once full), a
// SUBACK behind a session's queued messages could not be read while Open
// waited for it, and Open stood still. The broker sends at most the
// session's receive maximum unacknowledged, which bounds what waits here;
// past inboxLimit (QoS 0 messages, which no acknowledgement holds back)
// put waits for room, as a full channel would.
type inbox struct {
	once sync.Once // makes wake and room: the zero inbox is ready to use
	mu   sync.Mutex
	q    []delivery
	wake chan struct{} // capacity 1: something was put since the last take
	room chan struct{} // capacity 1: forward took the queue since
}

// inboxLimit is how many messages put queues before it waits.
const inboxLimit = 4 * int(receiveMaximum)

func (b *inbox) init() {
	b.once.Do(func() {
		b.wake, b.room = make(chan struct{}, 1), make(chan struct{}, 1)
	})
}

// put queues d, waiting while the inbox is full unless done is closed.
func (b *inbox) put(d delivery, done <-chan struct{}) {
	b.init()
	b.mu.Lock()
	for len(b.q) >= inboxLimit {
		b.mu.Unlock()
		select {
		case <-b.room:
		case <-done:
			return
		}
		b.mu.Lock()
	}
	b.q = append(b.q, d)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// forward hands what is queued to out, in order, until done is closed.
func (b *inbox) forward(out chan<- delivery, done <-chan struct{}) {
	b.init()
	var q []delivery
	for {
		select {
		case <-b.wake:
		case <-done:
			return
		}
		b.mu.Lock()
		q, b.q = b.q, q[:0]
		b.mu.Unlock()
		select {
		case b.room <- struct{}{}:
		default:
		}
		for i, d := range q {
			select {
			case out <- d:
			case <-done:
				return
			}
			q[i] = delivery{}
		}
	}
}
