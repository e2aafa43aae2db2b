package nats

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// natsSink publishes to a NATS subject (a template). With JetStream (the
// default) every message carries Nats-Msg-Id = message_id, so a retried
// publish inside the stream's duplicate window is stored once; a write
// returns only when every message of it is acknowledged by the stream.
// With no_jetstream it publishes on core NATS and flushes: the server has
// the messages, but nothing is persisted or acknowledged.
type natsSink struct {
	route   string
	subject *runtime.Template
	core    bool
	nc      *natsgo.Conn
	js      jetstream.JetStream
	stream  string
}

// natsAckTimeout bounds the wait for a JetStream publish acknowledgement.
const natsAckTimeout = 10 * time.Second

// natsSinkConfig is a nats sink's attributes.
type natsSinkConfig struct {
	natsConfig
}

func newNATSSink(b *runtime.BuildEnv, cfg *natsSinkConfig) (*natsSink, error) {
	ctx, log := b.Context(), b.Logger()
	url, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	s := &natsSink{route: b.Route(), core: cfg.NoJetStream, stream: cfg.Stream}
	if s.subject, err = b.Template("subject"); err != nil {
		return nil, err
	}
	if s.subject == nil {
		return nil, b.Errorf("subject", "required")
	}
	s.nc, err = natsgo.Connect(url,
		natsgo.Name("mqb route "+s.route),
		natsgo.Timeout(10*time.Second),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, b.Errorf("url", "connect to %s: %s", plan.RedactURLs(url), plan.RedactURLs(err.Error()))
	}
	if s.core {
		log.Info("nats sink (core NATS: no persistence, no acknowledgements)", "url", plan.RedactURLs(url))
		return s, nil
	}
	if s.js, err = jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(1<<16),
		jetstream.WithPublishAsyncTimeout(natsAckTimeout)); err != nil {
		s.nc.Close()
		return nil, b.Errorf("url", "jetstream: %v", err)
	}
	// The stream must exist: without one a JetStream publish is never
	// acknowledged and every batch would time out.
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	switch {
	case s.stream != "":
		if _, err := s.js.Stream(sctx, s.stream); err != nil {
			s.nc.Close()
			return nil, b.Errorf("stream", "JetStream stream %s: %v", s.stream, err)
		}
	case s.subject.IsStatic():
		subject, _ := s.subject.Render(nil) // static: renders without a record
		name, err := s.js.StreamNameBySubject(sctx, subject)
		if err != nil {
			s.nc.Close()
			return nil, b.Errorf("subject", "no JetStream stream captures subject %s (%v); create one, or set no_jetstream = true", subject, err)
		}
		s.stream = name
	default:
		log.Warn("nats sink: the subject is a template and no stream is named, so no stream was checked at start; set stream to check it")
	}
	if s.stream != "" {
		warnVolatileStream(sctx, log, s.js, s.stream)
	}
	log.Info("nats sink (JetStream)", "url", plan.RedactURLs(url), "stream", s.stream)
	return s, nil
}

// warnVolatileStream warns when the stream keeps its messages in memory:
// the server acknowledges a publish once the message is stored, and a
// restart of the server, even a clean one, loses what the stream held,
// which the route counted as delivered.
func warnVolatileStream(ctx context.Context, log *slog.Logger, js jetstream.JetStream, name string) {
	st, err := js.Stream(ctx, name)
	var info *jetstream.StreamInfo
	if err == nil {
		info, err = st.Info(ctx)
	}
	if err != nil {
		log.Warn("nats sink: could not read the stream's configuration; a publish counts as delivered once the stream acknowledges it", "stream", name, "err", plan.RedactURLs(err.Error()))
		return
	}
	if info.Config.Storage == jetstream.MemoryStorage {
		log.Warn("nats sink: the stream keeps its messages in memory: a restart of the server loses what the route delivered there; give the stream file storage", "stream", name)
	}
}

func (s *natsSink) programs() []*runtime.Program { return s.subject.Programs() }

// message builds r's NATS message: the payload, Nats-Msg-Id and
// mq_bridge.message_id = message_id, and every forwarded meta entry.
func (s *natsSink) message(r *runtime.Record) (*natsgo.Msg, error) {
	subj, err := s.subject.Render(r)
	if err != nil {
		return nil, err
	}
	if err := r.EncodePayload(); err != nil {
		return nil, err
	}
	keys := runtime.ForwardedMeta(r)
	h := make(natsgo.Header, len(keys)+2)
	id := r.MessageID()
	// Assigned directly: Header.Set would canonicalise the keys.
	h[runtime.HeaderMessageID] = []string{id}
	if !s.core {
		h[jetstream.MsgIDHeader] = []string{id}
	}
	for _, k := range keys {
		h[k] = []string{r.Meta[k]}
	}
	return &natsgo.Msg{Subject: subj, Data: r.Payload, Header: h}, nil
}

func (s *natsSink) Write(ctx context.Context, recs []*runtime.Record) error {
	msgs := make([]*natsgo.Msg, 0, len(recs))
	for _, r := range recs {
		m, err := s.message(r)
		if err != nil {
			r.Refuse(err.Error())
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	if s.core {
		for _, m := range msgs {
			if err := s.nc.PublishMsg(m); err != nil {
				return runtime.Retryable(fmt.Errorf("route %s: nats sink publish %s: %w", s.route, m.Subject, err))
			}
		}
		if err := s.nc.FlushTimeout(natsAckTimeout); err != nil {
			return runtime.Retryable(fmt.Errorf("route %s: nats sink flush: %w", s.route, err))
		}
		return nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			// The ones already sent are stored; a retry repeats them with
			// the same Nats-Msg-Id and the stream drops the repeats.
			return runtime.Retryable(fmt.Errorf("route %s: nats sink publish %s: %w", s.route, m.Subject, err))
		}
		futures = append(futures, f)
	}
	var failed int
	var first error
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			failed++
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return runtime.Retryable(fmt.Errorf("route %s: nats sink: %w", s.route, ctx.Err()))
		}
	}
	if failed > 0 {
		// Retried whatever the cause: the Nats-Msg-Id keeps the messages
		// that did land from landing twice within the duplicate window.
		return runtime.Retryable(fmt.Errorf("route %s: nats sink: %d of %d publishes not acknowledged, first: %w", s.route, failed, len(futures), first))
	}
	return nil
}

func (s *natsSink) Close() error {
	if s.js != nil {
		select {
		case <-s.js.PublishAsyncComplete():
		case <-time.After(5 * time.Second):
		}
	}
	s.nc.Close()
	return nil
}
