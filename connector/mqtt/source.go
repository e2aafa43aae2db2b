package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/connector/internal/brokersrc"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// source subscribes to a topic filter. At QoS 1 it is a persistent
// session (its client_id fixed, clean start off, the session kept for
// session_expiry) with manual acknowledgements: a message's PUBACK is
// sent only once the route has acked its record and every record read
// before it, so whatever a crash or a lost connection left unacknowledged
// the broker sends again when the session resumes (at-least-once; the
// sink's key absorbs the repeat). A lost connection fails the route
// (loudly); the next run resumes the session. At QoS 0 nothing is
// acknowledged or kept: at-most-once, as the compiler says.
type source struct {
	route    string
	log      *slog.Logger
	url      string
	topic    string
	clientID string
	qos      byte
	expiry   time.Duration
	format   string
	metadata bool

	client *paho.Client
	msgs   chan *paho.Publish
	errs   chan error
	done   chan struct{}

	seq              uint64
	producerIDReason string

	unacked brokersrc.Unacked[*paho.Publish] // QoS 1 messages read, not yet acknowledged, by Seq
}

// sourceConfig is an mqtt source's attributes.
type sourceConfig struct {
	URL            []plan.Part   `attr:"url"`
	Topic          []plan.Part   `attr:"topic"`
	ClientID       string        `attr:"client_id"`
	QoS            int64         `attr:"qos"`
	SessionExpiry  time.Duration `attr:"session_expiry"`
	ProducerIDs    bool          `attr:"producer_ids"`
	Format         string        `attr:"format"`
	SourceMetadata bool          `attr:"source_metadata"`
}

func buildSource(b *runtime.BuildEnv, cfg *sourceConfig) (runtime.Source, error) {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &source{route: b.Route(), log: b.Logger(), url: url, clientID: cfg.ClientID, expiry: cfg.SessionExpiry,
		format: cfg.Format, metadata: cfg.SourceMetadata,
		msgs: make(chan *paho.Publish, 4096), errs: make(chan error, 1), done: make(chan struct{})}
	for _, p := range cfg.Topic {
		if p.Expr != "" {
			return nil, b.Errorf("topic", "a source subscribes to one topic filter: ${%s} has no record to render from", p.Expr)
		}
		s.topic += p.Lit
	}
	if s.topic == "" {
		return nil, b.Errorf("topic", "required")
	}
	switch cfg.QoS {
	case 0, 1:
		s.qos = byte(cfg.QoS)
	default:
		return nil, b.Errorf("qos", "must be 0 or 1, got %d", cfg.QoS)
	}
	if s.clientID == "" {
		if s.qos == 1 {
			return nil, b.Errorf("client_id", "required at QoS 1: the broker keeps the route's persistent session (its subscription and unacknowledged messages) under a fixed client id")
		}
		s.clientID = "mqb-" + uuid.NewString()
	}
	if s.expiry < time.Second || s.expiry > time.Duration(1<<32-1)*time.Second {
		return nil, b.Errorf("session_expiry", "must be between 1s and about 136 years, got %v", s.expiry)
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the mqtt source", s.format)
	}
	return s, nil
}

func (s *source) Name() string         { return runtime.SafeName("mqtt_" + s.clientID) }
func (s *source) Replayable() bool     { return false }
func (s *source) RecordFormat() string { return s.format }
func (s *source) SeqGaps() bool        { return false }

// Position: the broker keeps the session.
func (s *source) Position(map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	return checkpoint.Position{}, false
}

func (s *source) Open(ctx context.Context, _ checkpoint.Position, _ bool, _ runtime.SourceHost) error {
	expiry := uint32(s.expiry / time.Second)
	recvMax := uint16(65535)
	cfg := paho.ClientConfig{
		EnableManualAcknowledgment: s.qos == 1,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			select {
			case s.msgs <- pr.Packet:
			case <-s.done:
			}
			return true, nil
		}},
		OnClientError:      s.fail,
		OnServerDisconnect: func(d *paho.Disconnect) { s.fail(fmt.Errorf("the broker disconnected (reason %d)", d.ReasonCode)) },
	}
	cp := &paho.Connect{ClientID: s.clientID, KeepAlive: 30, CleanStart: s.qos == 0,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry, ReceiveMaximum: &recvMax}}
	if s.qos == 0 {
		cp.Properties.SessionExpiryInterval = nil
	}
	c, err := connect(ctx, s.url, cfg, cp)
	if err != nil {
		return fmt.Errorf("route %s: mqtt source: %w", s.route, err)
	}
	s.client = c
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	sa, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: s.topic, QoS: s.qos}}})
	if err == nil && len(sa.Reasons) > 0 && sa.Reasons[0] >= 0x80 {
		err = fmt.Errorf("refused (reason %d)", sa.Reasons[0])
	}
	if err != nil {
		return fmt.Errorf("route %s: mqtt source: subscribe to %s: %w", s.route, s.topic, err)
	}
	if s.qos == 0 {
		s.log.Warn("mqtt source at QoS 0: at-most-once (messages published while the route is down or in flight at a crash are lost)", "topic", s.topic)
	}
	s.log.Info("mqtt source", "url", plan.RedactURLs(s.url), "topic", s.topic, "client_id", s.clientID, "qos", s.qos)
	return nil
}

// fail hands a lost connection to Next, which stops the route with it:
// the broker keeps the session, and the next run resumes it.
func (s *source) fail(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

// Next returns the messages received so far, waiting for the first.
func (s *source) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 256))
	select {
	case <-ctx.Done():
		return b, false, nil
	case err := <-s.errs:
		return nil, false, fmt.Errorf("route %s: mqtt source: connection lost: %w (the broker keeps the session: a new run resumes it)", s.route, err)
	case m := <-s.msgs:
		s.add(b, m)
	}
	for b.Len() < max {
		select {
		case m := <-s.msgs:
			s.add(b, m)
		default:
			return b, false, nil
		}
	}
	return b, false, nil
}

func (s *source) add(b *runtime.Batch, m *paho.Publish) {
	r := runtime.Record{Payload: m.Payload, Seq: s.seq, Next: int64(s.seq + 1)}
	s.seq++
	var user paho.UserProperties
	if m.Properties != nil {
		user = m.Properties.User
	}
	id, stamped := messageID(user)
	if stamped {
		r.SetMessageID(id)
	}
	if s.producerIDReason != "" && !stamped {
		r.DeadLetter(runtime.MissingProducerID("an "+runtime.HeaderMessageID+" user property", s.producerIDReason))
	}
	if len(user) > 0 || s.metadata {
		r.Meta = make(map[string]string, len(user)+1)
	}
	for _, p := range user {
		if p.Key != runtime.HeaderMessageID {
			r.Meta[p.Key] = p.Value
		}
	}
	if s.metadata {
		r.Meta[runtime.MetaSourcePrefix+"topic"] = m.Topic
	}
	switch {
	case m.QoS > 0:
		s.unacked.Push(m)
	case s.qos == 1:
		// A QoS 0 message on a QoS 1 subscription (its publisher sent it
		// at QoS 0): nothing to acknowledge, but it holds its Seq.
		s.unacked.Push(nil)
	}
	b.Add(r)
}

// idSpace names the UUIDs derived from a producer's id that is not a UUID.
var idSpace = uuid.MustParse("a1c7e2d4-6b3f-4e09-8d51-2f7a9c0b3e64")

// messageID reads the record's identity from the user property
// mq_bridge.message_id (a value that is not a UUID is hashed into one).
func messageID(user paho.UserProperties) (uuid.UUID, bool) {
	return brokersrc.MessageID(idSpace, user.Get(runtime.HeaderMessageID))
}

// Commit acknowledges, in the order received, every QoS 1 message up to
// the route's committed position.
func (s *source) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	pos, ok := changed[0]
	if !ok || s.qos == 0 {
		return nil
	}
	for _, m := range s.unacked.Take(pos.Next) {
		if m == nil {
			continue
		}
		if err := s.client.Ack(m); err != nil {
			// Not fatal: the broker sends it again when the session resumes.
			s.log.Warn("mqtt source: PUBACK failed; the message will be redelivered", "err", err.Error())
			return nil
		}
	}
	return nil
}

func (s *source) Close() error {
	close(s.done)
	if s.client != nil {
		s.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	return nil
}

// RequireProducerID: a route whose proof rests on ids its producers stamp
// dead-letters a record that carries none.
func (s *source) RequireProducerID(reason string) { s.producerIDReason = reason }
