package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// redisSinkConfig is a redis sink's attributes.
type redisSinkConfig struct {
	redisConfig
	MaxLen int64 `attr:"max_len"`
}

// redisSink appends each record to a stream (a template) with XADD, a
// batch in one pipeline. An entry's fields are mq_bridge.message_id (the
// record's message_id), the payload under payload_field, and every
// forwarded meta entry. A write returns once the server acknowledged
// every XADD of it; a stream keeps no key a repeat could hit, so a
// replayed batch is appended again.
type redisSink struct {
	route        string
	stream       *runtime.Template
	payloadField string
	maxLen       int64
	c            *goredis.Client
}

func newRedisSink(b *runtime.BuildEnv, cfg *redisSinkConfig) (*redisSink, error) {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &redisSink{route: b.Route(), payloadField: cfg.PayloadField, maxLen: cfg.MaxLen}
	if s.stream, err = b.Template("stream"); err != nil {
		return nil, err
	}
	if s.stream == nil {
		return nil, b.Errorf("stream", "required")
	}
	if s.payloadField == "" {
		return nil, b.Errorf("payload_field", "must not be empty")
	}
	if s.maxLen < 0 {
		return nil, b.Errorf("max_len", "must be 0 (no trimming) or positive, got %d", s.maxLen)
	}
	if s.c, err = newClient(url, 3); err != nil {
		return nil, b.Errorf("url", "%v", err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), 15*time.Second)
	defer cancel()
	if err := s.c.Ping(ctx).Err(); err != nil {
		s.c.Close()
		return nil, b.Errorf("url", "connect to %s: %s", plan.RedactURLs(url), plan.RedactURLs(err.Error()))
	}
	warnVolatile(ctx, b.Logger(), s.c)
	b.Logger().Info("redis sink", "url", plan.RedactURLs(url), "max_len", s.maxLen)
	return s, nil
}

// warnVolatile warns when the server acknowledges a write before it is on
// disk (no append-only file, or one not synced on every write): a crash of
// the server, not a clean restart, then loses the writes of its last
// moments, which the route counts as delivered.
func warnVolatile(ctx context.Context, log *slog.Logger, c *goredis.Client) {
	cfg, err := c.ConfigGet(ctx, "append*").Result()
	if err != nil {
		log.Warn("redis sink: could not read the server's persistence settings (CONFIG GET); a write counts as durable once the server acknowledges it", "err", err)
		return
	}
	if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
		log.Warn("redis sink: the server acknowledges writes before they are on disk (appendonly " + cfg["appendonly"] + ", appendfsync " + cfg["appendfsync"] +
			"): a server crash can lose entries the route counted as delivered; set appendonly yes and appendfsync always")
	}
}

// Write appends recs in one pipeline. A record the server refuses on its
// own (the key holds something other than a stream) is refused; any other
// failure fails the batch, retryably: a retry appends the entries that
// did land again, which the verdict (at-least-once) allows.
func (s *redisSink) Write(ctx context.Context, recs []*runtime.Record) error {
	pipe := s.c.Pipeline()
	cmds := make([]*goredis.StringCmd, len(recs))
	queued := 0
	for i, r := range recs {
		args, err := s.entry(r)
		if err != nil {
			r.Refuse(err.Error())
			continue
		}
		cmds[i] = pipe.XAdd(ctx, args)
		queued++
	}
	if queued == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	if err == nil {
		return nil
	}
	var retry error
	for i, cmd := range cmds {
		if cmd == nil || cmd.Err() == nil {
			continue
		}
		if refusal(cmd.Err()) {
			recs[i].Refuse(fmt.Sprintf("redis sink: XADD to %s: %v", cmd.Args()[1], cmd.Err()))
			continue
		}
		if retry == nil {
			retry = cmd.Err()
		}
	}
	if retry != nil {
		return runtime.Retryable(fmt.Errorf("route %s: redis sink: %s", s.route, plan.RedactURLs(retry.Error())))
	}
	return nil
}

// refusal reports whether the server refused an XADD for what it was
// asked, not for its own state: the key holds another type. An allow-list:
// every other error (a lost connection, a server loading its data, out
// of memory) fails the batch, retryably.
func refusal(err error) bool {
	return strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// entry is r's XADD: its stream, message_id, payload and forwarded meta.
func (s *redisSink) entry(r *runtime.Record) (*goredis.XAddArgs, error) {
	stream, err := s.stream.Render(r)
	if err != nil {
		return nil, fmt.Errorf("redis sink stream: %w", err)
	}
	if stream == "" {
		return nil, fmt.Errorf("redis sink stream: renders empty")
	}
	if err := r.EncodePayload(); err != nil {
		return nil, err
	}
	keys := runtime.ForwardedMeta(r)
	vals := make([]any, 0, 4+2*len(keys))
	vals = append(vals, runtime.HeaderMessageID, r.MessageID(), s.payloadField, r.Payload)
	for _, k := range keys {
		if k == s.payloadField || k == runtime.HeaderMessageID {
			continue
		}
		vals = append(vals, k, r.Meta[k])
	}
	return &goredis.XAddArgs{Stream: stream, MaxLen: s.maxLen, Approx: s.maxLen > 0, ID: "*", Values: vals}, nil
}

func (s *redisSink) Close() error { return s.c.Close() }
