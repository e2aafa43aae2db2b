package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/connector/internal/brokersrc"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// source consumes one queue with manual acks. A delivery is acked only
// once the route has acked its record and every record read before it
// (the contiguous prefix the route commits), so whatever a crash, a stop
// or a lost connection leaves unacked the broker hands out again: at
// least once, and the sink's key absorbs the repeat. The broker keeps
// the position (which messages are left in the queue); a queue has no
// replayable position, so name_by = source_position is not available.
//
// When the connection drops the source connects again, with backoff,
// until the route stops: the deliveries of the lost channel come back
// from the broker, and their acks, which the broker would refuse on the
// new channel, are dropped. A broker that is up again but answers
// NOT_FOUND for the queue may still be recovering its durable queues;
// the source keeps trying for queueRecoveryWindow before it fails the
// route naming the queue.
type source struct {
	route    string
	node     string
	log      *slog.Logger
	url      string
	queue    string
	prefetch int
	format   string
	metadata bool

	// queueWindow is how long reconnecting goes on while the broker
	// answers NOT_FOUND for the queue (queueRecoveryWindow).
	queueWindow time.Duration

	conn       *amqp.Connection
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	gen        uint64 // channels opened so far; a delivery's tag is valid on gen only

	seq uint64 // Seq of the next record (a per-run count)

	// producerIDReason, set by a PremiseProducerID, dead-letters every
	// record without a producer-stamped id (RequireProducerID).
	producerIDReason string

	mu      sync.Mutex // guards conn, ch, deliveries and gen across a reconnect
	unacked brokersrc.Unacked[delivery]
}

// delivery is what an ack needs of a message read: its tag on the
// channel of generation gen.
type delivery struct {
	tag uint64
	gen uint64
}

func buildSource(b *runtime.BuildEnv, cfg *sourceConfig) (runtime.Source, error) {
	url, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	s := &source{
		route:    b.Route(),
		node:     b.NodeID(),
		log:      b.Logger(),
		url:      url,
		queue:    cfg.Queue,
		format:   cfg.Format,
		metadata: cfg.SourceMetadata,

		queueWindow: queueRecoveryWindow,
	}
	if s.queue == "" {
		return nil, b.Errorf("queue", "required: the queue the source consumes")
	}
	if cfg.Prefetch < 1 || cfg.Prefetch > 65535 {
		return nil, b.Errorf("prefetch", "must be between 1 and 65535, got %d", cfg.Prefetch)
	}
	s.prefetch = int(cfg.Prefetch)
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the amqp source", s.format)
	}
	return s, nil
}

func (s *source) Name() string         { return runtime.SafeName("amqp_" + s.queue) }
func (s *source) Replayable() bool     { return false }
func (s *source) RecordFormat() string { return s.format }
func (s *source) SeqGaps() bool        { return false }

// Position: the broker keeps what is left to deliver.
func (s *source) Position(map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	return checkpoint.Position{}, false
}

func (s *source) Open(ctx context.Context, _ checkpoint.Position, _ bool, _ runtime.SourceHost) error {
	if err := s.connect(); err != nil {
		return fmt.Errorf("route %s: amqp source: %w", s.route, err)
	}
	s.log.Info("amqp source", "url", plan.RedactURLs(s.url), "queue", s.queue, "prefetch", s.prefetch)
	return nil
}

// connect opens a connection and a channel consuming the queue.
func (s *source) connect() error {
	conn, ch, err := dial(s.url, "mqb route "+s.route)
	if err != nil {
		return err
	}
	if err := ch.Qos(s.prefetch, 0, false); err != nil {
		conn.Close()
		return fmt.Errorf("prefetch %d: %w", s.prefetch, err)
	}
	d, err := ch.Consume(s.queue, "", false, false, false, false, nil)
	if err != nil {
		conn.Close()
		return fmt.Errorf("consume queue %s: %w", s.queue, err)
	}
	s.mu.Lock()
	s.conn, s.ch, s.deliveries = conn, ch, d
	s.gen++
	s.mu.Unlock()
	return nil
}

// dial connects to url, with a heartbeat that notices a dead broker, and
// opens a channel.
func dial(url, name string) (*amqp.Connection, *amqp.Channel, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)
	conn, err := amqp.DialConfig(url, amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: props,
		Dial:       amqp.DefaultDial(10 * time.Second),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %s", plan.RedactURLs(url), plan.RedactURLs(err.Error()))
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("open a channel: %w", err)
	}
	return conn, ch, nil
}

// AckWindow is the prefetch: the broker sends no more than that many
// messages unacked, and the source acks in Commit (runtime.WindowedSource).
func (s *source) AckWindow() int { return s.prefetch }

// Next returns the messages received so far, waiting for the first.
func (s *source) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 256))
	for b.Len() == 0 {
		select {
		case <-ctx.Done():
			return b, false, nil
		case d, ok := <-s.deliveries:
			if !ok {
				if err := s.reconnect(ctx); err != nil {
					return nil, false, err
				}
				continue
			}
			s.add(b, &d)
		}
	}
	runtime.Fill(ctx, b, max, s.deliveries, func(d amqp.Delivery) { s.add(b, &d) })
	return b, false, nil // a closed channel: reconnected by the next call
}

// queueRecoveryWindow bounds how long a reconnecting source waits for
// its queue, and how long after connecting again the sink takes a
// returned message for a retryable failure rather than an unroutable
// record. RabbitMQ accepts connections before it has recovered its
// durable queues: after a restart it can answer NOT_FOUND for a queue
// that exists, and route a message for it nowhere, for as long as the
// recovery takes. A queue still missing after the window was deleted:
// the source fails the route naming it, the sink refuses the record.
const queueRecoveryWindow = 15 * time.Second

// reconnect replaces a lost connection, trying until the route stops.
// A broker that answers NOT_FOUND for the queue is given queueWindow to
// recover it; past that (or on another refusal of the broker once
// connected) the route fails instead.
func (s *source) reconnect(ctx context.Context) error {
	s.mu.Lock()
	old := s.conn
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	s.log.Warn("amqp source: connection lost; reconnecting (the messages not yet acked come back from the broker)", "queue", s.queue)
	wait := 100 * time.Millisecond
	var notFoundSince time.Time // the first NOT_FOUND of a run of them
	for {
		err := s.connect()
		if err == nil {
			s.log.Info("amqp source: reconnected", "queue", s.queue)
			return nil
		}
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			if notFoundSince.IsZero() {
				notFoundSince = time.Now()
			}
			if waited := time.Since(notFoundSince); waited >= s.queueWindow {
				return fmt.Errorf("route %s: amqp source: queue %s not found: after the connection was lost the broker answered NOT_FOUND for it for %s, longer than it takes to recover its queues: %w",
					s.route, s.queue, waited.Round(time.Millisecond), err)
			}
			// The broker is up: try again soon.
			wait = min(wait, time.Second)
			s.log.Warn("amqp source: queue not found after reconnecting; retrying while the broker recovers its queues",
				"queue", s.queue, "err", err.Error(), "retry_in", wait, "gives_up_in", (s.queueWindow - time.Since(notFoundSince)).Round(time.Millisecond))
		} else {
			notFoundSince = time.Time{}
			s.log.Warn("amqp source: reconnect", "err", err.Error(), "retry_in", wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (s *source) add(b *runtime.Batch, d *amqp.Delivery) {
	r := runtime.Record{Payload: d.Body, Seq: s.seq, Next: int64(s.seq + 1)}
	s.seq++
	id, stamped := messageID(d)
	if stamped {
		r.SetMessageID(id)
	}
	if s.producerIDReason != "" && !stamped {
		r.DeadLetter(runtime.MissingProducerID("a message_id property or "+runtime.HeaderMessageID+" header", s.producerIDReason))
	}
	if len(d.Headers) > 0 || s.metadata {
		r.Meta = make(map[string]string, len(d.Headers)+3)
	}
	for k, v := range d.Headers {
		if k == runtime.HeaderMessageID {
			continue
		}
		if str, ok := headerString(v); ok {
			r.Meta[k] = str
		}
	}
	if s.metadata {
		r.Meta[runtime.MetaSourcePrefix+"exchange"] = d.Exchange
		r.Meta[runtime.MetaSourcePrefix+"routing_key"] = d.RoutingKey
		r.Meta[runtime.MetaSourcePrefix+"redelivered"] = strconv.FormatBool(d.Redelivered)
	}
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	s.unacked.Push(delivery{tag: d.DeliveryTag, gen: gen})
	b.Add(r)
}

// headerString is a header's value as meta holds it: strings and numbers
// as text; tables, arrays and byte strings are left out.
func headerString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case bool, int8, int16, int32, int64, uint8, uint16, uint32, float32, float64:
		return fmt.Sprint(v), true
	case time.Time:
		return v.UTC().Format(time.RFC3339), true
	}
	return "", false
}

// idSpace names the UUIDs derived from a producer's id that is not a UUID.
var idSpace = uuid.MustParse("3f0b6c52-8e1d-4a57-b0c4-5d2e9a71f6c8")

// messageID reads the record's identity from the mq_bridge.message_id
// header, or else the message_id property (our sink writes the same UUID
// to both; another producer's id that is not a UUID is hashed into one,
// stable across redeliveries). Without either, the id is minted per read.
func messageID(d *amqp.Delivery) (uuid.UUID, bool) {
	h, _ := d.Headers[runtime.HeaderMessageID].(string)
	if h == "" {
		h = d.MessageId
	}
	return brokersrc.MessageID(idSpace, h)
}

// Commit acks every delivery up to the route's committed position: each
// of them was written (or dead-lettered, filtered, found a duplicate)
// before the ack. One ack with multiple set covers a run of deliveries of
// the current channel; those of a channel since lost are dropped (the
// broker has put them back in the queue).
func (s *source) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	pos, ok := changed[0]
	if !ok {
		return nil
	}
	acks := s.unacked.Take(pos.Next)
	s.mu.Lock()
	ch, gen := s.ch, s.gen
	s.mu.Unlock()
	var last uint64
	for _, d := range acks {
		if d.gen == gen {
			last = d.tag
		}
	}
	if last == 0 || ch == nil {
		return nil
	}
	if err := ch.Ack(last, true); err != nil {
		// Not fatal: the broker redelivers what it did not get an ack
		// for once the channel closes, and the sink absorbs the repeat.
		s.log.Warn("amqp source: ack failed; the messages will be redelivered", "err", err.Error())
	}
	return nil
}

func (s *source) Close() error {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn != nil {
		// Closing the channel first flushes the acks of the last commit.
		if s.ch != nil {
			s.ch.Close()
		}
		conn.Close()
	}
	return nil
}

// RequireProducerID: a route whose proof rests on ids its producers stamp
// (a dedup keyed on message_id) dead-letters a record that carries none,
// instead of letting an id minted per read stand in for it.
func (s *source) RequireProducerID(reason string) { s.producerIDReason = reason }
