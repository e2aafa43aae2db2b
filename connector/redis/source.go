package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// redisSourceConfig is a redis source's attributes.
type redisSourceConfig struct {
	redisConfig
	Group           string        `attr:"group"`
	Consumer        string        `attr:"consumer"`
	GroupStart      string        `attr:"group_start"`
	CheckpointStore string        `attr:"checkpoint_store"` // opened by the runtime (Position)
	ClaimIdle       time.Duration `attr:"claim_idle"`
	Block           time.Duration `attr:"block"`
	Format          string        `attr:"format"`
	SourceMetadata  bool          `attr:"source_metadata"`
}

// redisSource reads a stream as one consumer of a group. The server keeps
// the position: the group's last delivered id and, per consumer, the
// entries delivered and not yet acknowledged (the pending list). The
// source reads its own pending entries first (at start, and again after
// a failed read, whose reply may have been lost on the way), then new
// ones (">"), and acknowledges an entry only once the route committed
// past it. A read of new entries first checks that the stream was not
// trimmed past entries the group had not been delivered, and stops the
// route, reading nothing, when it was (trimcheck.go).
type redisSource struct {
	route    string
	log      *slog.Logger
	url      string
	stream   string
	group    string
	consumer string
	startID  string // "0" or "$", for a group the source creates
	// consumed: the route has committed through the group before (its
	// checkpoint says so, group_start = end only), so a group found gone
	// is made again at the stream's start; marked: this run's checkpoint
	// says so already.
	consumed     bool
	marked       bool
	opened       bool // the group was there, or made, when the source opened
	claimIdle    time.Duration
	block        time.Duration
	payloadField string
	format       string
	metadata     bool

	c *goredis.Client

	// Read state, the reader goroutine's alone.
	pending  bool   // reading the consumer's own pending entries after cursor
	cursor   string // the last entry id handed out ("0" before the first)
	last     uint64 // Seq of the last record handed out
	haveLast bool
	failing  time.Time // when the current run of failed reads began

	// The check for entries trimmed before the group read them
	// (trimcheck.go).
	noScript      bool      // the server refuses scripts: read without it
	warnedMaybe   time.Time // the last WARN of a loss that may have been
	warnedUnknown bool
	warnedNoCheck bool

	mu      sync.Mutex
	unacked []entryRef // handed out, not acknowledged, by Seq
	retry   []string   // ids whose XACK failed, sent again at the next commit
}

// entryRef is an entry handed out: its Seq and its id.
type entryRef struct {
	seq uint64
	id  string
}

func init() {
	runtime.RegisterSource("redis", buildRedisSource)
	runtime.RegisterSink("redis", func(b *runtime.BuildEnv, cfg *redisSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newRedisSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.stream.Programs(), nil
	})
}

func buildRedisSource(b *runtime.BuildEnv, cfg *redisSourceConfig) (runtime.Source, error) {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &redisSource{
		route: b.Route(), log: b.Logger(), url: url,
		group: cfg.Group, consumer: cfg.Consumer, claimIdle: cfg.ClaimIdle, block: cfg.Block,
		payloadField: cfg.PayloadField, format: cfg.Format, metadata: cfg.SourceMetadata,
		pending: true, cursor: "0",
	}
	if s.stream, err = staticStream(b, cfg.Stream); err != nil {
		return nil, err
	}
	if s.group == "" {
		return nil, b.Errorf("group", "required: the consumer group keeps the route's position on the server")
	}
	if s.consumer == "" {
		s.consumer = b.Route()
	}
	switch cfg.GroupStart {
	case "beginning":
		s.startID = "0"
	case "end":
		s.startID = "$"
	default:
		return nil, b.Errorf("group_start", "%q is not beginning or end", cfg.GroupStart)
	}
	if s.claimIdle <= 0 {
		return nil, b.Errorf("claim_idle", "must be positive, got %v", s.claimIdle)
	}
	if s.block < time.Millisecond {
		return nil, b.Errorf("block", "must be at least 1ms, got %v", s.block)
	}
	if s.payloadField == "" {
		return nil, b.Errorf("payload_field", "must not be empty")
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the redis source", s.format)
	}
	return s, nil
}

func (s *redisSource) Name() string {
	if name := runtime.SafeName(s.stream); name != "" {
		return name
	}
	return "redis"
}
func (s *redisSource) Replayable() bool     { return true }
func (s *redisSource) RecordFormat() string { return s.format }
func (s *redisSource) SeqGaps() bool        { return true }

// Position: the server keeps the group's position. With group_start =
// end the route still saves a checkpoint, once a run (at its first
// commit), holding no position: it says the route has read through the
// group, so a later start that finds the group gone (destroyed, or the
// stream deleted with it) makes it again at the stream's start, not at its
// end, which would pass over what was added in between.
func (s *redisSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	if s.startID != "$" || (committed != nil && s.marked) {
		return checkpoint.Position{}, false
	}
	return checkpoint.Position{Source: s.groupName(), Mode: "redis_group"}, true
}

// groupName says whose position the route reads from.
func (s *redisSource) groupName() string {
	return fmt.Sprintf("redis group %s on stream %s at %s", s.group, s.stream, plan.RedactURLs(s.url))
}

func (s *redisSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, _ runtime.SourceHost) error {
	s.consumed = haveCP && cp.Mode == "redis_group"
	c, err := newClient(s.url, -1)
	if err != nil {
		return fmt.Errorf("route %s: redis source url: %w", s.route, err)
	}
	s.c = c
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.createGroup(octx); err != nil {
		return err
	}
	s.opened = true
	claimed, err := s.claimStale(octx)
	if err != nil {
		return err
	}
	s.log.Info("redis source", "url", plan.RedactURLs(s.url), "stream", s.stream, "group", s.group,
		"consumer", s.consumer, "claimed", claimed)
	return nil
}

// createGroup creates the group, and the stream with it, when absent,
// with its entries-read counter set (createScript): a group made at the
// beginning of a stream trimmed before it existed has lost nothing.
//
// group_start applies to the route's first start only. A group made
// again, gone after the route read through it (destroyed, or the stream
// deleted and written anew), starts at the stream's beginning: whatever
// is there now was added after the route last read, or is read again.
func (s *redisSource) createGroup(ctx context.Context) error {
	var err error
	start, again := s.startID, s.consumed || s.opened
	if again {
		start = "0"
	}
	if !s.noScript {
		err = createScript.Run(ctx, s.c, []string{s.stream}, s.group, start).Err()
		if scriptRefused(err) {
			s.scriptOff(err)
		}
	}
	if s.noScript {
		err = s.c.XGroupCreateMkStream(ctx, s.stream, s.group, start).Err()
	}
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "BUSYGROUP"):
	case err != nil:
		return fmt.Errorf("route %s: redis source: create group %s on stream %s: %s", s.route, s.group, s.stream, plan.RedactURLs(err.Error()))
	case again:
		s.log.Warn("redis source: the consumer group the route read through was gone (destroyed, or the stream deleted); made it again at the stream's start: the entries still there are read again, and those removed with it are lost",
			"stream", s.stream, "group", s.group)
	}
	return nil
}

// claimStale takes over the entries other consumers of the group read
// and left unacknowledged for claim_idle (a consumer that died): they
// join this consumer's pending entries, which Next reads first.
func (s *redisSource) claimStale(ctx context.Context) (int, error) {
	start, n := "0-0", 0
	for {
		ids, next, err := s.c.XAutoClaimJustID(ctx, &goredis.XAutoClaimArgs{
			Stream: s.stream, Group: s.group, Consumer: s.consumer, MinIdle: s.claimIdle, Start: start, Count: 1000,
		}).Result()
		if err != nil {
			return n, fmt.Errorf("route %s: redis source: claim the stale pending entries of group %s: %s", s.route, s.group, plan.RedactURLs(err.Error()))
		}
		n += len(ids)
		if next == "0-0" || next == "" {
			return n, nil
		}
		start = next
	}
}

// Next returns the next entries: the consumer's own pending ones while
// there are any, then new ones, waiting up to block for them. A failed
// read is retried until ctx is done, reading the pending entries again
// first: the server may have delivered entries whose reply was lost.
//
// New entries are read by readScript, which first checks that the
// stream was not trimmed past entries the group had not been delivered
// yet: if it was, Next returns the error that stops the route, naming
// them, and the group does not read past them (trimcheck.go). Waiting
// for new entries is an XREAD BLOCK of the stream after the group's
// last delivered entry, then the script reads them.
func (s *redisSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 1024))
	// A read in flight when the route stops is finished, not abandoned:
	// what the server delivered is handed out, and the drain delivers it.
	rctx := context.WithoutCancel(ctx)
	waited := false
	for wait := 50 * time.Millisecond; ctx.Err() == nil; {
		if !s.pending && !s.noScript {
			r, err := s.readNew(rctx, max)
			switch {
			case err == nil && r.state == "gone":
				return nil, false, s.trimmedError(r) // entries trimmed before the group read them
			case scriptRefused(err):
				s.scriptOff(err)
				continue
			case err != nil:
				s.readFailed(ctx, err, &wait)
				continue
			}
			s.recovered()
			if len(r.msgs) > 0 || waited {
				for _, m := range r.msgs {
					s.add(b, m)
				}
				return b, false, nil
			}
			// Nothing new: wait up to block for an entry after the
			// group's last delivered one (XREAD moves nothing), then
			// read it through the script.
			after := r.last
			if after == "" {
				after = "$"
			}
			err = s.c.XRead(rctx, &goredis.XReadArgs{Streams: []string{s.stream, after}, Count: 1, Block: s.block}).Err()
			switch {
			case errors.Is(err, goredis.Nil):
				return b, false, nil // no new entry within block
			case err != nil:
				s.readFailed(ctx, err, &wait)
				continue
			}
			waited = true
			continue
		}
		args := &goredis.XReadGroupArgs{Group: s.group, Consumer: s.consumer, Count: int64(max), Block: s.block,
			Streams: []string{s.stream, ">"}}
		if s.pending {
			args.Streams[1], args.Block = s.cursor, -1
		}
		res, err := s.c.XReadGroup(rctx, args).Result()
		switch {
		case errors.Is(err, goredis.Nil):
			s.recovered()
			return b, false, nil // no new entry within block
		case err != nil:
			s.readFailed(ctx, err, &wait)
			continue
		}
		s.recovered()
		var msgs []goredis.XMessage
		for _, st := range res {
			msgs = append(msgs, st.Messages...)
		}
		if s.pending && len(msgs) == 0 {
			s.pending = false
			continue
		}
		for _, m := range msgs {
			s.add(b, m)
		}
		return b, false, nil
	}
	return b, false, nil
}

// readFailed logs a failed read, waits (longer each time, up to 2s, less
// if ctx ends) and makes the next read start from the pending entries.
// A group that is gone (the server lost it, or it was destroyed) is
// created again.
func (s *redisSource) readFailed(ctx context.Context, err error, wait *time.Duration) {
	if s.failing.IsZero() {
		s.failing = time.Now()
		s.log.Warn("redis source: read failed; retrying", "stream", s.stream, "err", plan.RedactURLs(err.Error()))
	}
	s.pending = true
	if strings.HasPrefix(err.Error(), "NOGROUP") {
		s.log.Warn("redis source: the group is gone; creating it again", "stream", s.stream, "group", s.group)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if cerr := s.createGroup(cctx); cerr != nil {
			s.log.Warn("redis source: create the group", "err", cerr)
		}
		cancel()
	}
	select {
	case <-ctx.Done():
	case <-time.After(*wait):
	}
	*wait = min(*wait*2, 2*time.Second)
}

func (s *redisSource) recovered() {
	if !s.failing.IsZero() {
		s.log.Info("redis source: reading again", "stream", s.stream, "after", time.Since(s.failing).Round(time.Millisecond))
		s.failing = time.Time{}
	}
}

// add turns entry m into the next record of b.
func (s *redisSource) add(b *runtime.Batch, m goredis.XMessage) {
	seq, inRange := entrySeq(m.ID)
	if inRange && s.haveLast && seq <= s.last {
		// Already handed out in this run: a server that lost its latest
		// writes delivers it again. Its first delivery is acknowledged
		// when committed; a second record would go backwards.
		s.log.Warn("redis source: the server delivered an entry again; skipped (it is in flight)", "stream", s.stream, "id", m.ID)
		return
	}
	if !inRange {
		seq = 0
		if s.haveLast {
			seq = s.last + 1
		}
	}
	s.last, s.haveLast, s.cursor = seq, true, m.ID
	r := runtime.Record{Seq: seq, Next: int64(seq + 1)}
	id, _ := entryMessageID(s.stream, m.ID, m.Values)
	r.SetMessageID(id)
	payload, ok := m.Values[s.payloadField].(string)
	switch {
	case m.Values == nil:
		r.DeadLetter(fmt.Sprintf("stream %s entry %s was deleted (XDEL or a trim) after it was read and before it was acknowledged: its fields are gone", s.stream, m.ID))
	case !ok:
		// The DLQ gets the entry's fields, as a JSON object.
		fields, _ := json.Marshal(m.Values)
		r.Payload = fields
		r.DeadLetter(fmt.Sprintf("stream %s entry %s has no %q field (its fields: %s)", s.stream, m.ID, s.payloadField, strings.Join(sortedFields(m.Values), ", ")))
	case !inRange:
		r.Payload = []byte(payload)
		r.DeadLetter(fmt.Sprintf("stream %s entry id %s is beyond the positions the redis source numbers (milliseconds below 2^42, a sequence part below 2^21): write entries with generated ids (*)", s.stream, m.ID))
	default:
		r.Payload = []byte(payload)
	}
	for k, v := range m.Values {
		if k == s.payloadField || k == runtime.HeaderMessageID {
			continue
		}
		if r.Meta == nil {
			r.Meta = make(map[string]string, len(m.Values)+2)
		}
		r.Meta[k] = fmt.Sprint(v)
	}
	if s.metadata && r.Meta == nil {
		r.Meta = make(map[string]string, 2)
	}
	if s.metadata {
		r.Meta[runtime.MetaSourcePrefix+"stream"] = s.stream
		r.Meta[runtime.MetaSourcePrefix+"id"] = m.ID
	}
	s.mu.Lock()
	s.unacked = append(s.unacked, entryRef{seq: seq, id: m.ID})
	s.mu.Unlock()
	b.Add(r)
}

func sortedFields(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Commit acknowledges every entry before the route's committed position:
// each was written (or dead-lettered, filtered, found a duplicate). A
// failed XACK is not fatal: the entries stay pending and are sent again
// at the next commit (or read again at the next start, and the route's
// sink absorbs or repeats them as its verdict says).
func (s *redisSource) Commit(ctx context.Context, changed map[int32]runtime.AckPos) error {
	pos, ok := changed[0]
	if !ok {
		return nil
	}
	s.marked = true // the route saved Position's checkpoint before this
	s.mu.Lock()
	n, _ := slices.BinarySearchFunc(s.unacked, pos.Next, func(e entryRef, next uint64) int {
		switch {
		case e.seq < next:
			return -1
		case e.seq > next:
			return 1
		}
		return 0
	})
	ids := slices.Grow(s.retry, n)
	for _, e := range s.unacked[:n] {
		ids = append(ids, e.id)
	}
	s.unacked = slices.Delete(s.unacked, 0, n)
	s.retry = nil
	s.mu.Unlock()
	if err := s.ack(ctx, ids); err != nil {
		s.log.Warn("redis source: acknowledge failed; retried at the next commit", "stream", s.stream, "entries", len(ids), "err", plan.RedactURLs(err.Error()))
		s.mu.Lock()
		s.retry = append(ids, s.retry...)
		s.mu.Unlock()
	}
	return nil
}

// ack sends XACK for ids, in chunks.
func (s *redisSource) ack(ctx context.Context, ids []string) error {
	const chunk = 1024
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for len(ids) > 0 {
		n := min(len(ids), chunk)
		if err := s.c.XAck(actx, s.stream, s.group, ids[:n]...).Err(); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

func (s *redisSource) Close() error {
	if s.c == nil {
		return nil
	}
	s.mu.Lock()
	retry := s.retry
	s.retry = nil
	s.mu.Unlock()
	if len(retry) > 0 {
		s.ack(context.Background(), retry) // best effort: unacknowledged ones are read again
	}
	return s.c.Close()
}
