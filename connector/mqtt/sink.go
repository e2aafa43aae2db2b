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
// DLQ gets it); a lost connection or a timeout fails the batch
// retryably, and the retry publishes it again: a broker cannot absorb a
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
	if s.client == nil || isDone(s.client) {
		if err := s.connect(ctx); err != nil {
			return runtime.Retryable(fmt.Errorf("route %s: mqtt sink: %w", s.route, err))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, inFlight)
		errMu sync.Mutex
		first error
	)
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
		p := &paho.Publish{QoS: 1, Topic: topic, Payload: r.Payload, Properties: &paho.PublishProperties{User: user}}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			resp, err := s.client.Publish(ctx, p)
			switch {
			case err != nil && resp != nil && resp.ReasonCode >= 0x80:
				r.Refuse(fmt.Sprintf("the broker refused the publish to %s (reason %d %s)", topic, resp.ReasonCode, reasonString(resp)))
			case err != nil:
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return runtime.Retryable(fmt.Errorf("route %s: mqtt sink: %w", s.route, first))
	}
	return nil
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
