package amqp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// sink publishes to an exchange with a routing key (a template), every
// message persistent, mandatory and under publisher confirms: a write
// returns only when the broker has confirmed every message of it, which
// for a durable queue means the message is on disk. A message the
// exchange routed to no queue comes back (basic.return) before its
// confirm, and its record is refused with the reason (the DLQ gets it);
// a nack, a lost connection or a timeout fails the batch retryably, and
// the retry publishes it again: a broker cannot absorb a repeat, so the
// sink is at-least-once, as the compiler says.
//
// After it connected again (a lost connection, a restarted broker), a
// return is not yet trusted for queueRecoveryWindow: RabbitMQ takes
// connections before it has recovered its durable queues and meanwhile
// routes a message for one of them nowhere. A return then fails the
// write retryably instead of refusing the record.
type sink struct {
	route      string
	log        *slog.Logger
	url        string
	exchange   string
	routingKey *runtime.Template

	mu      sync.Mutex // one write at a time owns the channel
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	// reconnected is when Write last connected again after losing the
	// connection; zero before that.
	reconnected time.Time
	// recoveryWindow is queueRecoveryWindow: for this long after
	// reconnected a return fails the write retryably.
	recoveryWindow time.Duration
}

// confirmTimeout bounds the wait for the broker's confirms of a write.
const confirmTimeout = 30 * time.Second

// returnsBuffer holds the returns of unroutable messages between the
// client's reader and the write that drains them: the reader blocks on
// a full buffer, so it must hold a write's worth (the engine's batches
// are far smaller).
const returnsBuffer = 1 << 16

func newSink(b *runtime.BuildEnv, cfg *sinkConfig) (*sink, error) {
	url, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	s := &sink{route: b.Route(), log: b.Logger(), url: url, exchange: cfg.Exchange, recoveryWindow: queueRecoveryWindow}
	if s.routingKey, err = b.Template("routing_key"); err != nil {
		return nil, err
	}
	if s.routingKey == nil {
		return nil, b.Errorf("routing_key", "required: the routing key the sink publishes with (the queue's name on the default exchange)")
	}
	if err := s.connect(); err != nil {
		return nil, b.Errorf("url", "%v", err)
	}
	// The exchange must exist: publishing to a missing one closes the
	// channel, and every batch would fail.
	if s.exchange != "" {
		ch, err := s.conn.Channel()
		if err == nil {
			err = ch.ExchangeDeclarePassive(s.exchange, "", false, false, false, false, nil)
			if err == nil {
				ch.Close()
			}
		}
		if err != nil {
			s.conn.Close()
			return nil, b.Errorf("exchange", "exchange %s: %v", s.exchange, err)
		}
	}
	s.log.Info("amqp sink (publisher confirms)", "url", plan.RedactURLs(url), "exchange", s.exchange)
	return s, nil
}

// connect opens a connection and a channel in confirm mode.
func (s *sink) connect() error {
	conn, ch, err := dial(s.url, "mqb route "+s.route)
	if err != nil {
		return err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return fmt.Errorf("publisher confirms: %w", err)
	}
	s.conn, s.ch = conn, ch
	s.returns = ch.NotifyReturn(make(chan amqp.Return, returnsBuffer))
	return nil
}

// publishing builds r's message: the payload, persistent, message_id as
// the message_id property and the mq_bridge.message_id header, and every
// forwarded meta entry as a header.
func publishing(r *runtime.Record) (amqp.Publishing, error) {
	if err := r.EncodePayload(); err != nil {
		return amqp.Publishing{}, err
	}
	keys := runtime.ForwardedMeta(r)
	id := r.MessageID()
	h := make(amqp.Table, len(keys)+1)
	h[runtime.HeaderMessageID] = id
	for _, k := range keys {
		h[k] = r.Meta[k]
	}
	return amqp.Publishing{Headers: h, MessageId: id, DeliveryMode: amqp.Persistent, Body: r.Payload}, nil
}

func (s *sink) Write(ctx context.Context, recs []*runtime.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil || s.ch.IsClosed() {
		if s.conn != nil {
			s.conn.Close()
		}
		s.ch = nil
		if err := s.connect(); err != nil {
			return runtime.Retryable(fmt.Errorf("route %s: amqp sink: %w", s.route, err))
		}
		s.reconnected = time.Now()
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	type pending struct {
		r  *runtime.Record
		dc *amqp.DeferredConfirmation
	}
	sent := make([]pending, 0, len(recs))
	byID := make(map[string]*runtime.Record, len(recs))
	for _, r := range recs {
		key, err := s.routingKey.Render(r)
		if err != nil {
			r.Refuse(err.Error())
			continue
		}
		msg, err := publishing(r)
		if err != nil {
			r.Refuse(err.Error())
			continue
		}
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.exchange, key, true, false, msg)
		if err != nil {
			// The ones already sent may be stored; a retry repeats them.
			return runtime.Retryable(fmt.Errorf("route %s: amqp sink publish to %q with routing key %q: %w", s.route, s.exchange, key, err))
		}
		sent = append(sent, pending{r, dc})
		byID[msg.MessageId] = r
	}
	var nacked int
	for _, p := range sent {
		acked, err := p.dc.WaitContext(ctx)
		if err != nil {
			return runtime.Retryable(fmt.Errorf("route %s: amqp sink: waiting for confirms: %w", s.route, err))
		}
		if !acked {
			nacked++
		}
	}
	// A channel that closes settles every confirm it still owed as a
	// nack: that is a lost connection (or a channel the broker closed),
	// not messages the broker refused, and the error says so.
	if nacked > 0 && s.ch.IsClosed() {
		return runtime.Retryable(fmt.Errorf("route %s: amqp sink: the connection to the broker (%s) was lost before it confirmed %d of %d messages",
			s.route, plan.RedactURLs(s.url), nacked, len(sent)))
	}
	// A return arrives before its message's confirm, so every return of
	// this write is buffered by now.
	var returned []amqp.Return
	for {
		select {
		case ret, ok := <-s.returns:
			if !ok {
				return runtime.Retryable(fmt.Errorf("route %s: amqp sink: channel closed", s.route))
			}
			returned = append(returned, ret)
			continue
		default:
		}
		break
	}
	if len(returned) > 0 && !s.reconnected.IsZero() && time.Since(s.reconnected) < s.recoveryWindow {
		ret := returned[0]
		return runtime.Retryable(fmt.Errorf("route %s: amqp sink: %d of %d messages came back unroutable (exchange %q, routing key %q: %d %s) within %s of connecting again: the broker may still be recovering its queues",
			s.route, len(returned), len(sent), ret.Exchange, ret.RoutingKey, ret.ReplyCode, ret.ReplyText, s.recoveryWindow))
	}
	for _, ret := range returned {
		if r := byID[ret.MessageId]; r != nil {
			r.Refuse(fmt.Sprintf("unroutable: exchange %q routed routing key %q to no queue (%d %s)", ret.Exchange, ret.RoutingKey, ret.ReplyCode, ret.ReplyText))
		}
	}
	if nacked > 0 {
		return runtime.Retryable(fmt.Errorf("route %s: amqp sink: the broker refused (nacked) %d of %d messages", s.route, nacked, len(sent)))
	}
	return nil
}

func (s *sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
	}
	return nil
}
