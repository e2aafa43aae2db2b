package mqtt

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// sink publishes each record at QoS 1 to a topic (a template) and waits
// for its PUBACK: a write returns only when the broker acknowledged every
// message of it. A PUBACK with a failure reason refuses the record (the
// DLQ gets it, or the route stops on it without one); the publishes a
// broker closing the connection after such a refusal left unanswered are
// sent again on a new one. A lost connection or a timeout that settles no
// record fails the batch retryably, and the retry publishes it again: a broker cannot absorb a
// repeat, so the sink is at-least-once, as the compiler says. Each
// message carries message_id as the user property mq_bridge.message_id.
type sink struct {
	route    string
	url      string
	clientID string
	topic    *runtime.Template

	mu     sync.Mutex
	client *paho.Client
}

// sinkConfig is an mqtt sink's attributes.
type sinkConfig struct {
	URL      []plan.Part `attr:"url"`
	Topic    []plan.Part `attr:"topic"`
	ClientID string      `attr:"client_id"`
}

// inFlight bounds the publishes of a write waiting for their PUBACK.
const inFlight = 256

func init() {
	runtime.RegisterSource("mqtt", buildSource)
	runtime.RegisterSink("mqtt", func(b *runtime.BuildEnv, cfg *sinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.topic.Programs(), nil
	})
}

func newSink(b *runtime.BuildEnv, cfg *sinkConfig) (*sink, error) {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &sink{route: b.Route(), url: url, clientID: cfg.ClientID}
	if s.clientID == "" {
		s.clientID = "mqb-" + uuid.NewString()
	}
	if s.topic, err = b.Template("topic"); err != nil {
		return nil, err
	}
	if s.topic == nil {
		return nil, b.Errorf("topic", "required")
	}
	if err := s.connect(b.Context()); err != nil {
		return nil, b.Errorf("url", "%v", err)
	}
	b.Logger().Info("mqtt sink (QoS 1)", "url", plan.RedactURLs(url), "client_id", s.clientID)
	return s, nil
}

func (s *sink) connect(ctx context.Context) error {
	c, err := connect(ctx, s.url, paho.ClientConfig{}, &paho.Connect{ClientID: s.clientID, KeepAlive: 30, CleanStart: true})
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

func (s *sink) Write(ctx context.Context, recs []*runtime.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pending := make([]outgoing, 0, len(recs))
	for _, r := range recs {
		topic, err := s.topic.Render(r)
		if err == nil && (topic == "" || strings.ContainsAny(topic, "+#")) {
			err = fmt.Errorf("topic %q is not a topic a message can be published to", topic)
		}
		if err == nil {
			err = r.EncodePayload()
		}
		if err != nil {
			r.Refuse(err.Error())
			continue
		}
		user := paho.UserProperties{{Key: runtime.HeaderMessageID, Value: r.MessageID()}}
		for _, k := range runtime.ForwardedMeta(r) {
			user = append(user, paho.UserProperty{Key: k, Value: r.Meta[k]})
		}
		pending = append(pending, outgoing{r, &paho.Publish{QoS: 1, Topic: topic, Payload: r.Payload, Properties: &paho.PublishProperties{User: user}}})
	}
	// A broker may close the connection after refusing a publish
	// (Mosquitto 2.0.11 with persistence on does, right after a PUBACK of
	// 0x87, not authorized): the publishes in flight on it fail without an
	// answer, and the refusal itself may lose the race with the close.
	// What is left is sent again on a new connection as long as rounds
	// settle records (acknowledged or refused); after a round that settles
	// none, one message at a time, so that a refusal is the last thing
	// on its connection; when that settles none either, the batch fails.
	limit := inFlight
	for len(pending) > 0 {
		if s.client == nil || isDone(s.client) {
			if err := s.connect(ctx); err != nil {
				return runtime.Retryable(fmt.Errorf("route %s: mqtt sink: %w", s.route, err))
			}
		}
		failed, err := s.publish(ctx, pending, limit)
		if len(failed) == len(pending) {
			if limit == 1 || ctx.Err() != nil {
				return runtime.Retryable(fmt.Errorf("route %s: mqtt sink: %w", s.route, err))
			}
			limit = 1
		}
		pending = failed
	}
	return nil
}

// answerGrace is how long the publishes of a closed connection still wait
// for the answers read before it closed.
const answerGrace = 250 * time.Millisecond

// outgoing is a record and the message that carries it.
type outgoing struct {
	rec *runtime.Record
	msg *paho.Publish
}

// publish sends every message on the current connection, limit at a time,
// and waits for its PUBACK: a record whose PUBACK carries a failure reason is refused
// with it; those without an answer (the connection lost, the time up) are
// returned, with the first error.
func (s *sink) publish(ctx context.Context, out []outgoing, limit int) ([]outgoing, error) {
	c := s.client
	// A publish in flight when the connection drops is never answered:
	// end the wait when the client is done, a moment later, so that the
	// answers read before the end (the refusal that made the broker close
	// it) reach their publishes first.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.Done():
			select {
			case <-time.After(answerGrace):
			case <-ctx.Done():
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	var (
		wg     sync.WaitGroup
		sem    = make(chan struct{}, limit)
		mu     sync.Mutex
		failed []outgoing
		first  error
	)
	for _, o := range out {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			resp, err := c.Publish(ctx, o.msg)
			switch {
			case err != nil && resp != nil && resp.ReasonCode >= 0x80:
				o.rec.Refuse(fmt.Sprintf("the broker refused the publish to %s (reason %d %s)", o.msg.Topic, resp.ReasonCode, reasonString(resp)))
			case err != nil:
				mu.Lock()
				failed = append(failed, o)
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed, first
}

func reasonString(r *paho.PublishResponse) string {
	if r.Properties != nil {
		return r.Properties.ReasonString
	}
	return ""
}

func isDone(c *paho.Client) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

func (s *sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}
	return nil
}
