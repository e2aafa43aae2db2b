package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
// sink's key absorbs the repeat). At QoS 0 nothing is acknowledged or
// kept: at-most-once, as the compiler says.
//
// When the connection is lost (the broker stopped, crashed, or another
// client took the session over) the source connects again with the same
// client id, backing off from 100 ms to 5 s, until the route stops. Each
// connection is a generation, and each message read carries the one it
// came in on: a PUBACK is sent only on that connection, and those owed
// for the messages of a lost one are dropped (a packet id means nothing
// on another connection: on a new session the broker numbers other
// messages with it). The broker sends those messages again on the resumed
// session, and they are handed to the route again, as after a crash.
//
// That the broker keeps the session is the plan's premise session_kept.
// A broker that no longer has it (CONNACK with session present false: it
// restarted without its persistence, the session expired, or a client
// with the same id started a clean one) has lost what it held for the
// route. On a reconnect, or on the first connection of a run whose route
// has committed from this source before (a checkpoint exists: the source
// keeps one, holding no position, just to know), the source ends the
// empty session the connection made and stops the route with an error
// naming the client id and the broker; ending it makes every later start
// find no session and refuse too, until an operator resets the route's
// state or sets on_session_lost = resubscribe. A first start (no
// checkpoint) creates the session. Under on_session_lost = resubscribe
// (at-most-once, as the compiler says) the source subscribes again with
// a warning.
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
	// resubscribe: on_session_lost = resubscribe; otherwise a lost
	// session stops the route.
	resubscribe bool
	premise     string // the session_kept premise's words, once armed
	// consumed: the route's checkpoint says it has committed from this
	// source before, so the broker must have the session at Open too.
	consumed bool
	// marked: this run's checkpoint is saved; Position need not save
	// another (it holds no position, only that the route has consumed).
	marked bool

	// inbox takes what the client receives without waiting, and hands it
	// on to msgs, which Next reads.
	inbox inbox
	msgs  chan delivery
	done  chan struct{}
	errs  chan error // a broken premise the watcher found (dropped.go)

	drops dropWatch

	mu   sync.Mutex // guards link across a reconnect (Next reconnects, Commit acks)
	link *link      // the current connection
	gens uint64     // connections attempted so far
	wait time.Duration

	seq              uint64
	producerIDReason string

	unacked brokersrc.Unacked[delivery] // QoS 1 messages read, not yet acknowledged, by Seq
}

// link is one connection to the broker, generation gen of the source's.
type link struct {
	gen    uint64
	client *paho.Client
	since  time.Time

	mu  sync.Mutex
	err error // why it ended, when the client said
}

// lost records why the connection ended (the first reason given).
func (l *link) lost(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.mu.Unlock()
}

func (l *link) why() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		return errors.New("the connection closed")
	}
	return l.err
}

// delivery is a message read and the generation of the connection it
// came in on; a nil msg is a QoS 0 message on a QoS 1 subscription,
// which holds its Seq but has nothing to acknowledge.
type delivery struct {
	msg *paho.Publish
	gen uint64
}

// The reconnect backoff: the first attempt waits minBackoff, each failed
// one doubles the wait up to maxBackoff. A connection lost within
// maxBackoff of being made (two runs sharing a client_id take the session
// from each other) goes on from the last wait rather than from the start.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// sourceConfig is an mqtt source's attributes.
type sourceConfig struct {
	URL             []plan.Part   `attr:"url"`
	Topic           []plan.Part   `attr:"topic"`
	ClientID        string        `attr:"client_id"`
	QoS             int64         `attr:"qos"`
	SessionExpiry   time.Duration `attr:"session_expiry"`
	ProducerIDs     bool          `attr:"producer_ids"`
	Format          string        `attr:"format"`
	SourceMetadata  bool          `attr:"source_metadata"`
	OnSessionLost   string        `attr:"on_session_lost"`
	CheckpointStore string        `attr:"checkpoint_store"` // the engine opens it
}

func buildSource(b *runtime.BuildEnv, cfg *sourceConfig) (runtime.Source, error) {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &source{route: b.Route(), log: b.Logger(), url: url, clientID: cfg.ClientID, expiry: cfg.SessionExpiry,
		format: cfg.Format, metadata: cfg.SourceMetadata, resubscribe: cfg.OnSessionLost == "resubscribe",
		msgs: make(chan delivery, 4096), done: make(chan struct{}), errs: make(chan error, 1)}
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
	switch cfg.OnSessionLost {
	case "fail", "resubscribe":
	default:
		return nil, b.Errorf("on_session_lost", "must be fail or resubscribe, got %q", cfg.OnSessionLost)
	}
	return s, nil
}

// keepsSession: a lost session stops the route (QoS 1 without
// on_session_lost = resubscribe).
func (s *source) keepsSession() bool { return s.qos == 1 && !s.resubscribe }

// ArmPremise takes the session_kept premise. The source checks it on
// every connection (connect) whenever it keeps its session, armed or
// not; arming gives the error the premise's words.
func (s *source) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseSessionKept {
		return fmt.Errorf("the mqtt source cannot check a %s premise", p.Kind)
	}
	if !s.keepsSession() {
		return errors.New("the mqtt source does not keep its session here (qos = 0 or on_session_lost = resubscribe): the plan's verdict should be at-most-once")
	}
	s.premise = p.Holds
	return nil
}

func (s *source) Name() string         { return runtime.SafeName("mqtt_" + s.clientID) }
func (s *source) Replayable() bool     { return false }
func (s *source) RecordFormat() string { return s.format }
func (s *source) SeqGaps() bool        { return false }

// Position: the broker keeps the session, and with it the position. A
// source that keeps its session still has the route save a checkpoint,
// once a run (at its first commit), holding no position: it says the
// route has consumed from this client id's session, so a later start
// that finds the session gone knows messages were lost (Open).
func (s *source) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	if !s.keepsSession() {
		return checkpoint.Position{}, false
	}
	accepted := s.drops.accepted.Load() // +1; 0: not known yet
	if committed != nil && s.marked && s.drops.saved.Load() == accepted {
		return checkpoint.Position{}, false
	}
	s.drops.saved.Store(accepted)
	if accepted == 0 {
		return checkpoint.Position{Source: s.sessionName(), Mode: "mqtt_session"}, true
	}
	return checkpoint.Position{Source: s.sessionName(), Mode: modeDropped, Offset: int64(accepted - 1)}, true
}

// sessionName says whose session the route consumes from.
func (s *source) sessionName() string {
	return fmt.Sprintf("mqtt session of client_id %s at %s", s.clientID, plan.RedactURLs(s.url))
}

func (s *source) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, _ runtime.SourceHost) error {
	s.consumed = haveCP && s.keepsSession()
	if s.consumed && cp.Source != s.sessionName() {
		s.log.Warn("mqtt source: the route's checkpoint is of another session; the broker must still have this one", "checkpoint", plan.RedactURLs(cp.Source), "session", s.sessionName())
	}
	go s.inbox.forward(s.msgs, s.done)
	present, err := s.connect(ctx, false)
	if err != nil {
		return fmt.Errorf("route %s: mqtt source: %w", s.route, err)
	}
	if s.keepsSession() {
		s.watchDropped(uint64(max(cp.Offset, 0)), s.consumed && cp.Mode == modeDropped)
	}
	if s.qos == 0 {
		s.log.Warn("mqtt source at QoS 0: at-most-once (messages published while the route is down or in flight at a crash are lost)", "topic", s.topic)
	}
	s.log.Info("mqtt source", "url", plan.RedactURLs(s.url), "topic", s.topic, "client_id", s.clientID, "qos", s.qos, "session_present", present)
	return nil
}

// refusal is the broker's answer that no reconnect changes: it refused the
// subscription, or it has lost the route's session.
type refusal struct{ error }

// sessionLost is the error of a broken session_kept premise: the broker
// has no session for the client id, though the route had one (on a
// reconnect) or committed from one before (at Open).
func (s *source) sessionLost(resume bool) error {
	when := "on reconnecting"
	if !resume {
		when = "at start-up, though the route's checkpoint says it has consumed from this session before"
	}
	premise := s.premise
	if premise == "" {
		premise = "the broker keeps the session of client_id " + s.clientID + " while the route is stopped or disconnected"
	}
	return refusal{fmt.Errorf("the broker %s no longer has the session of client_id %s (CONNACK session present = false %s): "+
		"what it held for the route, messages published while the route was away and those not yet acknowledged, is lost; "+
		"the plan's premise session_kept is broken (%s). Nothing uncommitted was acknowledged. "+
		"Find why the broker lost it (restarted without persistence, session_expiry passed, another client took the client_id with a clean start); "+
		"to go on knowingly, reset the route's state (mqbc state reset), after which the next start subscribes afresh, "+
		"or set on_session_lost = resubscribe (the route is then at-most-once)",
		plan.RedactURLs(s.url), s.clientID, when, premise)}
}

// connect opens a connection, the next generation, and subscribes to the topic: on
// the first connection always, on a reconnect only when the broker no
// longer has the session (a resumed session keeps its subscription). It
// says whether the broker had the session.
func (s *source) connect(ctx context.Context, resume bool) (bool, error) {
	s.mu.Lock()
	s.gens++ // every attempt a generation of its own: one that fails may have read messages
	l := &link{gen: s.gens, since: time.Now()}
	s.mu.Unlock()
	expiry := uint32(s.expiry / time.Second)
	recvMax := receiveMaximum
	cfg := paho.ClientConfig{
		EnableManualAcknowledgment: s.qos == 1,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			s.inbox.put(delivery{pr.Packet, l.gen}, s.done)
			return true, nil
		}},
		OnClientError: l.lost,
		OnServerDisconnect: func(d *paho.Disconnect) {
			why := ""
			if d.Properties != nil {
				why = d.Properties.ReasonString
			}
			if d.ReasonCode == 0x8E {
				why = "session taken over: another client connected with client_id " + s.clientID
			}
			l.lost(fmt.Errorf("the broker disconnected (reason %d %s)", d.ReasonCode, why))
		},
	}
	cp := &paho.Connect{ClientID: s.clientID, KeepAlive: 30, CleanStart: s.qos == 0,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry, ReceiveMaximum: &recvMax}}
	if s.qos == 0 {
		cp.Properties.SessionExpiryInterval = nil
	}
	c, ca, err := connectAck(ctx, s.url, cfg, cp)
	if err != nil {
		return false, err
	}
	l.client = c
	present := ca.SessionPresent
	if !present && s.keepsSession() && (resume || s.consumed) {
		// The broker made a new, empty session for this connection: end
		// it (expiry 0), so that a later start finds none and refuses as
		// this one does, rather than resuming an empty session quietly.
		zero := uint32(0)
		c.Disconnect(&paho.Disconnect{ReasonCode: 0, Properties: &paho.DisconnectProperties{SessionExpiryInterval: &zero}})
		return false, s.sessionLost(resume)
	}
	if !resume || !present {
		if resume && s.qos == 1 {
			s.log.Warn("mqtt source: the broker no longer has the session (session present = false): subscribing again (on_session_lost = resubscribe); messages it held for the old session (published while the route was disconnected, or sent and not yet acknowledged) may be lost",
				"client_id", s.clientID, "topic", s.topic)
		}
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		sa, err := c.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: s.topic, QoS: s.qos}}})
		if err == nil && len(sa.Reasons) > 0 && sa.Reasons[0] >= 0x80 {
			err = refusal{fmt.Errorf("refused (reason %d)", sa.Reasons[0])}
		}
		if err != nil {
			c.Disconnect(&paho.Disconnect{ReasonCode: 0})
			if r, ok := err.(refusal); ok {
				return false, refusal{fmt.Errorf("subscribe to %s: %w", s.topic, r.error)}
			}
			return false, fmt.Errorf("subscribe to %s: %w", s.topic, err)
		}
	}
	s.mu.Lock()
	s.link = l
	s.mu.Unlock()
	return present, nil
}

func (s *source) current() *link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.link
}

// receiveMaximum is how many QoS 1 messages the source lets the broker
// send it unacknowledged (the session's receive maximum). The client
// looks through every message it holds unacknowledged on each one it
// receives, and again on each acknowledgement: at 65535 a queue of 20k
// messages cost a quarter of a route's CPU there.
const receiveMaximum uint16 = 4096

// AckWindow is the receive maximum (runtime.WindowedSource): the route
// commits, and Commit acknowledges, once half of it is written, instead
// of leaving the broker waiting until the next commit tick.
func (s *source) AckWindow() int {
	if s.qos == 0 {
		return 0 // nothing is acknowledged
	}
	return int(receiveMaximum)
}

// Next returns the messages received so far, waiting for the first; when
// the connection is lost it hands out what was read on it, then connects
// again.
func (s *source) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 256))
	for b.Len() == 0 {
		l := s.current()
		select {
		case <-ctx.Done():
			return b, false, nil
		case err := <-s.errs:
			return nil, false, fmt.Errorf("route %s: mqtt source: %w", s.route, err)
		case d := <-s.msgs:
			s.add(b, d)
		case <-l.client.Done():
			select {
			case d := <-s.msgs:
				s.add(b, d)
				continue
			default:
			}
			if err := s.reconnect(ctx, l); err != nil {
				return nil, false, err
			}
		}
	}
	runtime.Fill(ctx, b, max, s.msgs, func(d delivery) { s.add(b, d) })
	return b, false, nil
}

// reconnect replaces the lost connection old, trying until the route
// stops (then it returns nil, and Next an empty batch). A subscription the
// broker refuses fails the route.
func (s *source) reconnect(ctx context.Context, old *link) error {
	wait := minBackoff
	if time.Since(old.since) < maxBackoff && s.wait > 0 {
		wait = min(2*s.wait, maxBackoff)
	}
	for first := true; ; first = false {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if first {
			// Said after the first wait: the client gives the broker's
			// reason (a DISCONNECT's) a moment after it has closed.
			what := "the broker sends what was not acknowledged again"
			if s.qos == 0 {
				what = "at QoS 0, what is published until the source has subscribed again is lost"
			}
			s.log.Warn("mqtt source: connection lost; reconnecting ("+what+")", "err", old.why().Error(), "client_id", s.clientID)
		}
		present, err := s.connect(ctx, true)
		if err == nil {
			s.wait = wait
			s.log.Info("mqtt source: reconnected", "client_id", s.clientID, "session_present", present)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		var r refusal
		if errors.As(err, &r) {
			return fmt.Errorf("route %s: mqtt source: %w", s.route, err)
		}
		wait = min(2*wait, maxBackoff)
		s.log.Warn("mqtt source: reconnect", "err", err.Error(), "retry_in", wait)
	}
}

func (s *source) add(b *runtime.Batch, d delivery) {
	m := d.msg
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
		s.unacked.Push(d)
	case s.qos == 1:
		// A QoS 0 message on a QoS 1 subscription (its publisher sent it
		// at QoS 0): nothing to acknowledge, but it holds its Seq.
		s.unacked.Push(delivery{gen: d.gen})
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
// the route's committed position that came in on the current connection;
// the PUBACKs owed on a lost one are dropped: the broker sends those
// messages again on the resumed session.
func (s *source) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	pos, ok := changed[0]
	if !ok || s.qos == 0 {
		return nil
	}
	s.marked = true // the route saved Position's checkpoint before this
	acks := s.unacked.Take(pos.Next)
	l := s.current()
	if isDone(l.client) {
		return nil // lost: Next connects again, and the broker resends these
	}
	for _, d := range acks {
		if d.msg == nil || d.gen != l.gen {
			continue
		}
		if err := l.client.Ack(d.msg); err != nil {
			// Not fatal: the broker sends it again when the session resumes.
			s.log.Warn("mqtt source: PUBACK failed; the message will be redelivered", "err", err.Error())
			return nil
		}
	}
	return nil
}

func (s *source) Close() error {
	close(s.done)
	if l := s.current(); l != nil {
		l.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	return nil
}

// RequireProducerID: a route whose proof rests on ids its producers stamp
// dead-letters a record that carries none.
func (s *source) RequireProducerID(reason string) { s.producerIDReason = reason }
