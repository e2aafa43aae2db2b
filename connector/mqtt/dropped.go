package mqtt

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/plan"
)

// A broker that keeps the route's session can still drop messages it
// queued for it: Mosquitto drops a client's QoS 1 messages past
// max_queued_messages (1000 by default) or max_queued_bytes, while the
// route is stopped, disconnected or behind, and says so only in its log.
// The session is present on the next connection, so the session check
// passes, and the messages are lost. tried: 3000 published while the
// route was stopped, 1000 read, the verdict effectively-once.
//
// A client cannot see the broker's limits, but Mosquitto counts what it
// dropped, for every client together, in the retained topic
// $SYS/broker/publish/messages/dropped. A source that keeps its session
// follows that count on a connection of its own, and its checkpoint keeps
// the count the route last accepted: a count above it (its first value
// after a start, or as it changes while the route runs) means messages
// were dropped while the route was away or behind; they may have been
// the route's, and the route stops, as when the session is lost. The
// route reads while the first value is awaited: what the broker kept is
// the route's either way. A broker that does not publish the count (not
// Mosquitto, sys_interval 0, an ACL keeping the client from $SYS) leaves
// the premise unchecked, and the route stops once droppedFirstWait has
// passed. A count lower than the one kept means the broker restarted
// (Mosquitto does not keep it): what it dropped before then is not known,
// which is said with a warning, and the count starts again from there.

// droppedTopic is Mosquitto's count of the messages it dropped.
const droppedTopic = "$SYS/broker/publish/messages/dropped"

// droppedFirstWait bounds the wait for the count's first value after
// subscribing (a variable for the tests). Mosquitto sends the retained
// value at once, but it serves its clients on one thread, between saves
// of its store: a broker saving many queued messages every
// autosave_interval on a loaded machine answered after more than 20 s.
// The wait does not hold the route up: it reads meanwhile, and stops once
// the count says messages were dropped, or when none came in time.
var droppedFirstWait = 2 * time.Minute

// modeDropped marks a checkpoint that holds, as its Offset, the broker's
// count of dropped messages the route last accepted.
const modeDropped = "mqtt_session dropped"

// dropWatch follows the broker's count of dropped messages.
type dropWatch struct {
	// accepted is the count the route accepts as not its loss (+1; 0:
	// not known yet): the one its checkpoint kept, or the first seen on
	// a first start.
	accepted atomic.Uint64
	// saved is what the route's checkpoint holds of it (+1; 0: none).
	saved  atomic.Uint64
	values chan uint64
	client atomic.Pointer[paho.Client]
}

// acceptedCount is the accepted count, and whether it is known yet.
func (w *dropWatch) acceptedCount() (uint64, bool) {
	n := w.accepted.Load()
	return n - 1, n > 0
}

func (w *dropWatch) accept(n uint64) { w.accepted.Store(n + 1) }

// watchDropped starts the watcher: it connects, reads the count's current
// value and checks it against the one the route's checkpoint kept
// (known), then follows the count until the source closes, reconnecting
// as the data connection does. A count above the accepted one, or no
// count within droppedFirstWait, stops the route (Next): the route reads
// meanwhile, what the broker kept for it being its own either way.
func (s *source) watchDropped(kept uint64, known bool) {
	w := &s.drops
	if known {
		w.accept(kept)
	}
	go func() {
		// Until droppedFirstWait has passed, a broker that cannot be
		// reached is tried again, as the data connection does: an outage
		// at the start is ridden through, not taken for a hidden count.
		ctx, cancel := context.WithTimeout(context.Background(), droppedFirstWait)
		go func() {
			select {
			case <-s.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		var first uint64
		var err error
		for wait := minBackoff; ; wait = min(2*wait, maxBackoff) {
			if first, err = s.dropConnect(ctx); err == nil {
				break
			}
			var r refusal
			if errors.As(err, &r) {
				break
			}
			if ctx.Err() != nil {
				if ctx.Err() == context.DeadlineExceeded {
					err = s.cannotCheck(fmt.Errorf("not read within %v: %w", droppedFirstWait, err))
				}
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		cancel()
		if err != nil {
			s.fail(err)
			return
		}
		switch {
		case !known:
			w.accept(first)
		case first < kept:
			s.log.Warn("mqtt source: the broker's count of dropped messages is lower than when the route last read it: the broker restarted, and what it dropped before then is not known",
				"count", first, "was", kept, "client_id", s.clientID)
			w.accept(first)
		default:
			if err := s.checkDropped(first); err != nil {
				s.fail(err)
				w.client.Load().Disconnect(&paho.Disconnect{ReasonCode: 0})
				return
			}
		}
		s.followDropped()
	}()
}

// fail hands the route an error that stops it (Next), unless it has one.
func (s *source) fail(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

// dropConnect opens the watcher's connection, subscribes to the count and
// returns its current value.
func (s *source) dropConnect(ctx context.Context) (uint64, error) {
	vals := make(chan uint64, 16)
	cfg := paho.ClientConfig{
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			if n, err := strconv.ParseUint(strings.TrimSpace(string(pr.Packet.Payload)), 10, 64); err == nil && pr.Packet.Topic == droppedTopic {
				select {
				case vals <- n:
				default: // a later value follows; the latest one is what counts
				}
			}
			return true, nil
		}},
	}
	c, err := connect(ctx, s.url, cfg, &paho.Connect{ClientID: "mqb-drops-" + uuid.NewString()[:8], KeepAlive: 30, CleanStart: true})
	if err != nil {
		return 0, err // the broker down or restarting: tried again
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	sa, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: droppedTopic, QoS: 0}}})
	if err != nil {
		c.Disconnect(&paho.Disconnect{ReasonCode: 0})
		return 0, fmt.Errorf("subscribe to %s: %w", droppedTopic, err) // tried again
	}
	if len(sa.Reasons) > 0 && sa.Reasons[0] >= 0x80 {
		err = fmt.Errorf("refused (reason %d)", sa.Reasons[0])
	} else {
		select {
		case n := <-vals:
			s.drops.values = vals
			s.drops.client.Store(c)
			return n, nil
		case <-c.Done():
			return 0, fmt.Errorf("the connection reading %s closed before its value came", droppedTopic) // tried again
		case <-ctx.Done():
			if ctx.Err() != context.DeadlineExceeded {
				c.Disconnect(&paho.Disconnect{ReasonCode: 0})
				return 0, ctx.Err()
			}
			err = fmt.Errorf("no value within %v", droppedFirstWait)
		}
	}
	c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	return 0, s.cannotCheck(err)
}

// cannotCheck is the error of a broker that does not show its count.
func (s *source) cannotCheck(err error) error {
	return refusal{fmt.Errorf("subscribe to %s: %v. The broker %s must show its count of dropped messages for the route to check that none queued for its session (client_id %s) was dropped: "+
		"Mosquitto publishes it unless sys_interval is 0 or an ACL keeps the client from $SYS topics, and drops a client's queued messages past max_queued_messages (1000 by default) or max_queued_bytes. "+
		"Let the client read it, or set on_session_lost = resubscribe (the route is then at-most-once)",
		droppedTopic, err, plan.RedactURLs(s.url), s.clientID)}
}

// checkDropped is the error of a count above the accepted one.
func (s *source) checkDropped(n uint64) error {
	was, _ := s.drops.acceptedCount()
	if n <= was {
		return nil
	}
	premise := s.premise
	if premise == "" {
		premise = "the broker keeps the session of client_id " + s.clientID + " and drops none of the messages queued for it (Mosquitto drops them past max_queued_messages, 1000 by default, or max_queued_bytes: set both to 0)"
	}
	return refusal{fmt.Errorf("the broker %s dropped %d message(s) queued for its clients since the route last looked (%s went from %d to %d): "+
		"messages queued for this route's session (client_id %s), while it was stopped, disconnected or behind, may be among them, and are lost; "+
		"the plan's premise session_kept is broken (%s). Nothing uncommitted was acknowledged. "+
		"To go on knowingly, reset the route's state (mqbc state reset), or set on_session_lost = resubscribe (the route is then at-most-once)",
		plan.RedactURLs(s.url), n-was, droppedTopic, was, n, s.clientID, premise)}
}

// followDropped reads the count until the source closes: a count above
// the accepted one stops the route; a lower one (the broker restarted)
// is taken with a warning. A lost connection is made again.
func (s *source) followDropped() {
	w := &s.drops
	wait := minBackoff
	for {
		c := w.client.Load()
		select {
		case <-s.done:
			c.Disconnect(&paho.Disconnect{ReasonCode: 0})
			return
		case n := <-w.values:
			if was, _ := w.acceptedCount(); n < was {
				s.log.Warn("mqtt source: the broker's count of dropped messages went down: the broker restarted, and what it dropped before then is not known",
					"count", n, "was", was, "client_id", s.clientID)
				w.accept(n)
				continue
			}
			if err := s.checkDropped(n); err != nil {
				s.fail(err)
			}
		case <-c.Done():
			for {
				select {
				case <-s.done:
					return
				case <-time.After(wait):
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				n, err := s.dropConnect(ctx)
				cancel()
				if err == nil {
					wait = minBackoff
					select {
					case w.values <- n: // checked as any other value
					default: // a later value is queued already
					}
					break
				}
				wait = min(2*wait, maxBackoff)
			}
		}
	}
}
