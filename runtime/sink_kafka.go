package runtime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/plan"
)

// headerMessageID carries the record's message_id on broker sinks, so that
// an mqb (or mq-bridge) → broker → mqb hop keeps its identity. The value is
// the UUID's canonical 36-character text form (the same text NATS gets in
// Nats-Msg-Id); a reader should also accept 16 raw bytes.
const headerMessageID = "mq_bridge.message_id"

// metaSourcePrefix is the provenance namespace a publisher does not forward:
// it describes the hop a record arrived on, not the record.
const metaSourcePrefix = "mqb.src."

// recordTemplate is a template attribute compiled once: literal text and
// expressions rendered per record.
type recordTemplate struct {
	attr   string
	parts  []plan.Part
	progs  []*program // one per expression part, in order
	static string     // the text when there is no expression
	evals  sync.Pool
}

func compileTemplate(a nodeAttrs, c *compiler, name string) (*recordTemplate, error) {
	parts, ok := a.template(name)
	if !ok {
		return nil, nil
	}
	t := &recordTemplate{attr: name, parts: parts}
	t.evals.New = func() any { return new(evaluator) }
	var static strings.Builder
	for _, p := range parts {
		if p.Expr == "" {
			static.WriteString(p.Lit)
			continue
		}
		prog, err := c.compile(p.Expr)
		if err != nil {
			return nil, a.errorf(name, "${%s}: %v", p.Expr, err)
		}
		t.progs = append(t.progs, prog)
	}
	t.static = static.String()
	return t, nil
}

func (t *recordTemplate) isStatic() bool { return len(t.progs) == 0 }

// render renders t for r. A placeholder with no value fails the record: a
// partial render would give every such record the same key or subject.
func (t *recordTemplate) render(r *Record) (string, error) {
	if t.isStatic() {
		return t.static, nil
	}
	ev := t.evals.Get().(*evaluator)
	defer t.evals.Put(ev)
	var b strings.Builder
	i := 0
	for _, p := range t.parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
			continue
		}
		prog := t.progs[i]
		i++
		v, present, err := ev.run(prog, r)
		if err != nil {
			return "", fmt.Errorf("%s: %w", t.attr, err)
		}
		if !present {
			return "", fmt.Errorf("%s: ${%s} has no value", t.attr, prog.src)
		}
		s, err := stringify(v)
		if err != nil {
			return "", fmt.Errorf("%s: ${%s}: %w", t.attr, prog.src, err)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// forwardedMeta returns r's metadata a publisher forwards as headers (every
// key outside mqb.src.*), sorted by key.
func forwardedMeta(r *Record) []string {
	keys := make([]string, 0, len(r.Meta))
	for k := range r.Meta {
		if !strings.HasPrefix(k, metaSourcePrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// kafkaSink publishes each write as one WriteMessages call (acks from all
// in-sync replicas). A broker cannot absorb a repeat: a retried write may
// land twice, so the route is at-least-once unless a dedup step filters
// before it.
type kafkaSink struct {
	route  string
	topic  string
	key    *recordTemplate
	w      *kafka.Writer
	client *kafka.Client
}

// kafkaMaxMessageBytes is the broker default message.max.bytes; a larger
// record fails alone instead of failing its whole batch.
const kafkaMaxMessageBytes = 1 << 20

func kafkaBrokers(raw string) ([]string, error) {
	raw = strings.TrimPrefix(raw, "kafka://")
	var out []string
	for _, b := range strings.Split(raw, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if strings.Contains(b, "@") {
			return nil, errors.New("credentials in the broker list are not supported (SASL is not implemented)")
		}
		if _, _, err := net.SplitHostPort(b); err != nil {
			return nil, fmt.Errorf("broker %q: want host:port", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("no broker (want host:port[,host:port])")
	}
	return out, nil
}

func newKafkaSink(ctx context.Context, a nodeAttrs, c *compiler, rt *route) (*kafkaSink, error) {
	raw, err := c.renderStatic(a, "url")
	if err != nil {
		return nil, err
	}
	brokers, err := kafkaBrokers(raw)
	if err != nil {
		return nil, a.errorf("url", "%s", plan.RedactURLs(err.Error()))
	}
	topic := a.str("topic", "")
	if topic == "" {
		return nil, a.errorf("topic", "required")
	}
	s := &kafkaSink{route: a.route, topic: topic}
	if s.key, err = compileTemplate(a, c, "partition_key"); err != nil {
		return nil, err
	}
	addr := kafka.TCP(brokers...)
	s.client = &kafka.Client{Addr: addr, Timeout: 10 * time.Second}
	// The topic must exist: a typo would otherwise create a topic on
	// brokers that auto-create, or fail every batch later.
	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	md, err := s.client.Metadata(mctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, a.errorf("url", "metadata from %s: %s", strings.Join(brokers, ","), plan.RedactURLs(err.Error()))
	}
	found := false
	for _, t := range md.Topics {
		if t.Name == topic {
			if t.Error != nil {
				return nil, a.errorf("topic", "%s: %v", topic, t.Error)
			}
			found = len(t.Partitions) > 0
		}
	}
	if !found {
		return nil, a.errorf("topic", "topic %s does not exist on %s", topic, strings.Join(brokers, ","))
	}
	s.w = &kafka.Writer{
		Addr:         addr,
		Topic:        topic,
		Balancer:     &kafka.Hash{}, // by key; keyless records round-robin
		RequiredAcks: kafka.RequireAll,
		// One route write is one WriteMessages call: batches fill from it
		// and the last, partial one must not wait for more.
		BatchSize:    10000,
		BatchBytes:   kafkaMaxMessageBytes,
		BatchTimeout: time.Millisecond,
		WriteTimeout: 30 * time.Second,
		ReadTimeout:  30 * time.Second,
		MaxAttempts:  3,
	}
	rt.log.Info("kafka sink", "brokers", strings.Join(brokers, ","), "topic", topic)
	return s, nil
}

func (s *kafkaSink) programs() []*program {
	if s.key == nil {
		return nil
	}
	return s.key.progs
}

// message builds r's Kafka message: key from partition_key, the payload,
// the message_id header and every forwarded meta entry as a header.
func (s *kafkaSink) message(r *Record) (kafka.Message, error) {
	if err := encodePayload(r); err != nil {
		return kafka.Message{}, err
	}
	m := kafka.Message{Value: r.Payload}
	if s.key != nil {
		k, err := s.key.render(r)
		if err != nil {
			return m, err
		}
		m.Key = []byte(k)
	}
	keys := forwardedMeta(r)
	m.Headers = make([]kafka.Header, 0, len(keys)+1)
	m.Headers = append(m.Headers, kafka.Header{Key: headerMessageID, Value: []byte(r.MessageID())})
	for _, k := range keys {
		m.Headers = append(m.Headers, kafka.Header{Key: k, Value: []byte(r.Meta[k])})
	}
	size := len(m.Key) + len(m.Value) + 64
	for _, h := range m.Headers {
		size += len(h.Key) + len(h.Value) + 8
	}
	if size > kafkaMaxMessageBytes {
		return m, fmt.Errorf("kafka: record of %d bytes exceeds the %d-byte message limit", size, kafkaMaxMessageBytes)
	}
	return m, nil
}

func (s *kafkaSink) Write(ctx context.Context, recs []*Record) error {
	msgs := make([]kafka.Message, 0, len(recs))
	for _, r := range recs {
		m, err := s.message(r)
		if err != nil {
			r.sinkErr = err.Error()
			continue
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := s.w.WriteMessages(wctx, msgs...); err != nil {
		// A broker cannot tell a retried message from a new one, so a
		// retry may publish part of the batch twice: at-least-once.
		var werrs kafka.WriteErrors
		if errors.As(err, &werrs) {
			err = fmt.Errorf("%d of %d messages failed, first: %w", werrs.Count(), len(msgs), firstError(werrs))
		}
		return retryable(fmt.Errorf("route %s: kafka sink topic %s: %w", s.route, s.topic, err))
	}
	return nil
}

func firstError(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func (s *kafkaSink) Close() error { return s.w.Close() }
