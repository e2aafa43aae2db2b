package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/connector/internal/brokersrc"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// natsSource reads a NATS subject. With JetStream (the default) it is a
// durable pull consumer with explicit acks on a stream: a message is acked
// only once the route has acked its record and every record read before
// it (the contiguous prefix the route commits), so a crash redelivers
// whatever was not yet written (at-least-once; the sink's key absorbs the
// repeat). The server keeps the consumer's position; a subject has no
// replayable position, so name_by = source_position is not available.
//
// At start it checks that the stream did not remove messages the
// consumer had not been delivered (its limits, a purge): the route stops
// when they certainly were, and warns when they may have been
// (removedcheck.go).
//
// With no_jetstream it is a core NATS subscription: messages published
// while no route is subscribed, or in flight when it stops or crashes, are
// lost. That is at-most-once, and said so at start-up.
type natsSource struct {
	route    string
	node     string // the plan node, for premises
	log      *slog.Logger
	url      string
	subject  string
	stream   string
	durable  string
	core     bool
	ackWait  time.Duration
	format   string
	metadata bool
	// acceptLimits (stream_limits = accept): messages the stream's limits
	// removed are warned about, never a reason to stop.
	acceptLimits bool

	nc   *natsgo.Conn
	cc   jetstream.ConsumeContext
	sub  *natsgo.Subscription
	msgs chan *natsMsg
	errs chan error
	done chan struct{} // closed by close: a handler blocked on msgs gives up

	seq uint64 // Seq of the next record (a per-run count)

	// producerIDReason, set by a PremiseProducerID, dead-letters every
	// record without a producer-stamped id (RequireProducerID).
	producerIDReason string

	unacked brokersrc.Unacked[*natsMsg] // JetStream messages read, not yet acked, by Seq
}

type natsMsg struct {
	js   jetstream.Msg // JetStream; nil on core NATS
	core *natsgo.Msg
}

// natsConfig is what both ends of a nats endpoint read (stdlib declares
// the attributes and their defaults).
type natsConfig struct {
	URL         []plan.Part `attr:"url"` // rendered by renderStatic (env() allowed)
	Subject     []plan.Part `attr:"subject"`
	Stream      string      `attr:"stream"`
	NoJetStream bool        `attr:"no_jetstream"`
}

// natsSourceConfig is a nats source's attributes. ack_wait's default is
// longer than a record spends in the route, retries included.
type natsSourceConfig struct {
	natsConfig
	Durable        string        `attr:"durable"`
	AckWait        time.Duration `attr:"ack_wait"`
	StreamLimits   string        `attr:"stream_limits"`
	Format         string        `attr:"format"`
	SourceMetadata bool          `attr:"source_metadata"`
}

func init() {
	runtime.RegisterSource("nats", buildNATSSource, runtime.ChecksPremises(plan.PremiseStreamKeepsMessages))
	runtime.RegisterSink("nats", func(b *runtime.BuildEnv, cfg *natsSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newNATSSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	}, runtime.HoldsPremises(plan.PremiseKeyPresent))
}

func buildNATSSource(b *runtime.BuildEnv, cfg *natsSourceConfig) (runtime.Source, error) {
	url, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	s := &natsSource{
		route:        b.Route(),
		node:         b.NodeID(),
		log:          b.Logger(),
		url:          url,
		stream:       cfg.Stream,
		durable:      cfg.Durable,
		core:         cfg.NoJetStream,
		ackWait:      cfg.AckWait,
		format:       cfg.Format,
		metadata:     cfg.SourceMetadata,
		acceptLimits: cfg.StreamLimits == "accept",
		msgs:         make(chan *natsMsg, 4096),
		errs:         make(chan error, 1),
		done:         make(chan struct{}),
	}
	// The subject is a template attribute; a source needs it static.
	for _, p := range cfg.Subject {
		if p.Expr != "" {
			return nil, b.Errorf("subject", "a source subscribes to one subject: ${%s} has no record to render from", p.Expr)
		}
		s.subject += p.Lit
	}
	if s.subject == "" {
		return nil, b.Errorf("subject", "required")
	}
	if s.ackWait <= 0 {
		return nil, b.Errorf("ack_wait", "must be positive, got %v", s.ackWait)
	}
	if !s.core && s.durable == "" {
		return nil, b.Errorf("durable", "required with JetStream: the durable consumer keeps the route's position on the server (or set no_jetstream = true for an at-most-once core NATS subscription)")
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the nats source", s.format)
	}
	return s, nil
}

func (s *natsSource) Name() string {
	if s.durable != "" {
		return runtime.SafeName(s.durable)
	}
	return "nats"
}
func (s *natsSource) Replayable() bool     { return false }
func (s *natsSource) RecordFormat() string { return s.format }
func (s *natsSource) SeqGaps() bool        { return false }

// Position: the server keeps the durable consumer's position.
func (s *natsSource) Position(map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	return checkpoint.Position{}, false
}

func (s *natsSource) Open(ctx context.Context, _ checkpoint.Position, _ bool, _ runtime.SourceHost) error {
	var err error
	s.nc, err = natsgo.Connect(s.url,
		natsgo.Name("mqb route "+s.route),
		natsgo.Timeout(10*time.Second),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("route %s: nats source url: connect to %s: %s", s.route, plan.RedactURLs(s.url), plan.RedactURLs(err.Error()))
	}
	if s.core {
		s.sub, err = s.nc.Subscribe(s.subject, func(m *natsgo.Msg) {
			s.deliver(&natsMsg{core: m}) // blocks the subscription: slow consumer limits apply
		})
		if err != nil {
			return fmt.Errorf("route %s: nats source subject %s: %w", s.route, s.subject, err)
		}
		s.sub.SetPendingLimits(1<<20, 1<<30)
		s.log.Warn("nats source on core NATS: at-most-once (messages published while the route is down or in flight at a crash are lost)",
			"url", plan.RedactURLs(s.url), "subject", s.subject)
		return nil
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return fmt.Errorf("route %s: nats source: jetstream: %w", s.route, err)
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if s.stream, err = s.streamName(sctx, js); err != nil {
		return fmt.Errorf("route %s: nats source subject: %w", s.route, err)
	}
	cons, err := js.CreateOrUpdateConsumer(sctx, s.stream, jetstream.ConsumerConfig{
		Durable:       s.durable,
		FilterSubject: s.subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.ackWait,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 1 << 16,
	})
	if err != nil {
		return fmt.Errorf("route %s: nats source durable %s on stream %s: %w", s.route, s.durable, s.stream, err)
	}
	st, err := js.Stream(sctx, s.stream)
	if err != nil {
		return fmt.Errorf("route %s: nats source stream %s: %w", s.route, s.stream, err)
	}
	if err := s.checkRemoved(sctx, st, cons); err != nil {
		return err
	}
	s.cc, err = cons.Consume(func(m jetstream.Msg) {
		s.deliver(&natsMsg{js: m})
	}, jetstream.PullMaxMessages(2048), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrBadRequest) {
			// The library stops pulling for good after these: the
			// route would stand still with its messages unread.
			s.fail(s.consumerEnded(err))
			return
		}
		s.log.Warn("nats source: consume", "err", plan.RedactURLs(err.Error()))
	}))
	if err != nil {
		return fmt.Errorf("route %s: nats source durable %s: consume: %w", s.route, s.durable, err)
	}
	s.log.Info("nats source (JetStream)", "url", plan.RedactURLs(s.url), "stream", s.stream, "durable", s.durable, "subject", s.subject)
	return nil
}

// streamName is the stream the source reads: the one named, or the one
// capturing its subject.
func (s *natsSource) streamName(ctx context.Context, js jetstream.JetStream) (string, error) {
	if s.stream != "" {
		return s.stream, nil
	}
	name, err := js.StreamNameBySubject(ctx, s.subject)
	if err != nil {
		return "", fmt.Errorf("no JetStream stream captures %s (%v); create one, or set no_jetstream = true", s.subject, err)
	}
	return name, nil
}

// consumerEnded is the error that stops the route when the durable
// consumer can deliver no more: deleted (nats consumer rm, or a stream
// deleted), or a pull the server refuses.
func (s *natsSource) consumerEnded(err error) error {
	what := "the server refused its pull requests"
	if errors.Is(err, jetstream.ErrConsumerDeleted) {
		what = "it was deleted while the route ran"
	}
	return fmt.Errorf("route %s: nats source stream %s durable %s: %s (%v), so nothing more would be delivered; the route stops. "+
		"A rerun makes the consumer again, reading the stream from its first message: what is still there is read again, and what the stream removed for want of a consumer (interest or work-queue retention) is lost",
		s.route, s.stream, s.durable, what, err)
}

// fail stops the route with err (the first such error wins).
func (s *natsSource) fail(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

func (s *natsSource) deliver(m *natsMsg) {
	select {
	case s.msgs <- m:
	case <-s.done:
	}
}

// Next returns the messages received so far, waiting for the first.
func (s *natsSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 256))
	select {
	case <-ctx.Done():
		return b, false, nil
	case err := <-s.errs:
		return nil, false, err
	case m := <-s.msgs:
		s.add(b, m)
	}
	runtime.Fill(ctx, b, max, s.msgs, func(m *natsMsg) { s.add(b, m) })
	return b, false, nil
}

func (s *natsSource) add(b *runtime.Batch, m *natsMsg) {
	var data []byte
	var hdr natsgo.Header
	var subject string
	if m.js != nil {
		data, hdr, subject = m.js.Data(), m.js.Headers(), m.js.Subject()
	} else {
		data, hdr, subject = m.core.Data, m.core.Header, m.core.Subject
	}
	r := runtime.Record{Payload: data, Seq: s.seq, Next: int64(s.seq + 1)}
	s.seq++
	id, stamped := natsMessageID(hdr)
	if stamped {
		r.SetMessageID(id)
	}
	if s.producerIDReason != "" && !stamped {
		r.DeadLetter(runtime.MissingProducerID("a Nats-Msg-Id or "+runtime.HeaderMessageID+" header", s.producerIDReason))
	}
	if len(hdr) > 0 || s.metadata {
		r.Meta = make(map[string]string, len(hdr)+3)
	}
	for k, vs := range hdr {
		if k == runtime.HeaderMessageID || k == natsgo.MsgIdHdr || len(vs) == 0 {
			continue
		}
		r.Meta[k] = vs[0]
	}
	if s.metadata {
		r.Meta[runtime.MetaSourcePrefix+"subject"] = subject
		if m.js != nil {
			if md, err := m.js.Metadata(); err == nil {
				r.Meta[runtime.MetaSourcePrefix+"stream"] = md.Stream
				r.Meta[runtime.MetaSourcePrefix+"stream_sequence"] = strconv.FormatUint(md.Sequence.Stream, 10)
			}
		}
	}
	if m.js != nil {
		s.unacked.Push(m)
	}
	b.Add(r)
}

// natsIDSpace names the UUIDs derived from a Nats-Msg-Id that is not a UUID.
var natsIDSpace = uuid.MustParse("7c1d3a0e-2f55-4b8e-9a53-6f3c1e0b9d21")

// natsMessageID reads the record's identity from mq_bridge.message_id, or
// else Nats-Msg-Id (our sinks write the same UUID to both; another
// publisher's Nats-Msg-Id that is not a UUID is hashed into one, stable
// across redeliveries). Without either, the id is minted per read.
func natsMessageID(h natsgo.Header) (uuid.UUID, bool) {
	if id, ok := brokersrc.MessageID(natsIDSpace, h.Get(runtime.HeaderMessageID)); ok {
		return id, true
	}
	return brokersrc.MessageID(natsIDSpace, h.Get(natsgo.MsgIdHdr))
}

// Commit acks, on JetStream, every message up to the route's committed
// position: each of them was written (or dead-lettered, filtered, found a
// duplicate) before the ack.
func (s *natsSource) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	pos, ok := changed[0]
	if !ok || s.core {
		return nil
	}
	for _, m := range s.unacked.Take(pos.Next) {
		if err := m.js.Ack(); err != nil {
			// Not fatal: the server redelivers after ack_wait and the sink
			// absorbs the repeat.
			s.log.Warn("nats source: ack failed; the message will be redelivered", "err", plan.RedactURLs(err.Error()))
		}
	}
	return nil
}

func (s *natsSource) Close() error {
	close(s.done)
	if s.cc != nil {
		s.cc.Stop()
	}
	if s.sub != nil {
		s.sub.Unsubscribe()
	}
	if s.nc != nil {
		// Flush the acks sent by the last commit before closing.
		s.nc.FlushTimeout(5 * time.Second)
		s.nc.Close()
	}
	return nil
}

// RequireProducerID: a route whose proof rests on ids its producers stamp
// (a dedup keyed on message_id) dead-letters a record that carries none,
// instead of letting an id minted per read stand in for it.
func (s *natsSource) RequireProducerID(reason string) { s.producerIDReason = reason }
