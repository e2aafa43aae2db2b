package kafka

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// Provenance keys a source adds under source_metadata.
const (
	metaSrcTopic     = runtime.MetaSourcePrefix + "topic"
	metaSrcPartition = runtime.MetaSourcePrefix + "partition"
	metaSrcOffset    = runtime.MetaSourcePrefix + "offset"
	metaSrcKey       = runtime.MetaSourcePrefix + "key"
)

// kafkaRevokeWait bounds how long a rebalance waits for the records already
// read from a revoked partition to be acked before committing what is.
// Whatever is still in flight then is read again by the partition's next
// owner (at-least-once), never committed past.
const kafkaRevokeWait = 10 * time.Second

// kafkaSource reads a topic, every partition at once. Each record's
// position is its partition and offset (Record.Partition, Record.Seq), so
// a re-read yields the same records at the same positions: replayable.
//
// Without group_id the source reads every partition and keeps the next
// offset of each in the checkpoint store. With group_id it is a member of
// that consumer group: the group assigns partitions, and the committed
// offset of a partition is its contiguous acked position, committed to the
// group and never beyond. When a rebalance takes partitions away, what was
// read from them is given up to kafkaRevokeWait to be acked, committed
// under the generation that owned them, and forgotten: a later ack is
// ignored and nothing is committed for them again.
type kafkaSource struct {
	// producerIDReason, set by a PremiseProducerID, dead-letters every
	// record without a producer-stamped id (RequireProducerID).
	producerIDReason string

	route    string
	log      *slog.Logger
	brokers  []string
	topic    string
	groupID  string
	session  time.Duration // session_timeout: the group's wait for a silent member
	format   string
	metadata bool // source_metadata: mqb.src.topic/partition/offset
	sec      kafkaSecurity

	host   runtime.SourceHost
	msgs   chan kafkaMsg
	errs   chan error
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	// Consumer-group state. genID numbers our generations (Record.SetGeneration); a
	// message read under another generation, or while its generation is
	// draining, is dropped before it becomes a record.
	group    *kafkago.ConsumerGroup
	genMu    sync.Mutex
	gen      *kafkago.Generation
	genID    atomic.Uint32
	draining atomic.Bool
	assigned map[int32]bool
	// unsent holds offsets whose group commit failed, retried with the
	// next commit (under the same generation only).
	unsent map[int32]int64
	// resumed holds, without a group, the checkpointed next offset of each
	// partition the source resumed.
	resumed map[int32]runtime.AckPos
}

type kafkaMsg struct {
	m   kafkago.Message
	gen uint32
}

// kafkaConfig is what both ends of a kafka endpoint read (stdlib
// declares the attributes and their defaults).
type kafkaConfig struct {
	URL   []plan.Part `attr:"url"` // rendered by renderStatic (env() allowed)
	Topic string      `attr:"topic"`
	kafkaSecurityConfig
}

// kafkaSourceConfig is a kafka source's attributes.
type kafkaSourceConfig struct {
	kafkaConfig
	GroupID         string        `attr:"group_id"`
	SessionTimeout  time.Duration `attr:"session_timeout"`
	CheckpointStore string        `attr:"checkpoint_store"` // openCheckpointStore
	Format          string        `attr:"format"`
	SourceMetadata  bool          `attr:"source_metadata"`
}

func init() {
	runtime.RegisterSource("kafka", buildKafkaSource)
	runtime.RegisterSink("kafka", func(b *runtime.BuildEnv, cfg *kafkaSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newKafkaSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	}, runtime.HoldsPremises(plan.PremiseKeyPresent))
}

// kafkaBrokersOf renders a kafka endpoint's url into its broker list.
func kafkaBrokersOf(b *runtime.BuildEnv) ([]string, error) {
	raw, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	brokers, err := kafkaBrokers(raw)
	if err != nil {
		return nil, b.Errorf("url", "%s", plan.RedactURLs(err.Error()))
	}
	return brokers, nil
}

func buildKafkaSource(b *runtime.BuildEnv, cfg *kafkaSourceConfig) (runtime.Source, error) {
	brokers, err := kafkaBrokersOf(b)
	if err != nil {
		return nil, err
	}
	s := &kafkaSource{
		route:    b.Route(),
		log:      b.Logger(),
		brokers:  brokers,
		topic:    cfg.Topic,
		groupID:  cfg.GroupID,
		session:  cfg.SessionTimeout,
		format:   cfg.Format,
		metadata: cfg.SourceMetadata,
		msgs:     make(chan kafkaMsg, 4096),
		errs:     make(chan error, 1),
		assigned: map[int32]bool{},
		unsent:   map[int32]int64{},
	}
	if s.topic == "" {
		return nil, b.Errorf("topic", "required")
	}
	if s.session < 3*time.Second || s.session > 5*time.Minute {
		return nil, b.Errorf("session_timeout", "must be from 3s to 5m, got %v", s.session)
	}
	if s.sec, err = kafkaSecurityFrom(b, &cfg.kafkaSecurityConfig); err != nil {
		return nil, err
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the kafka source", s.format)
	}
	return s, nil
}

func (s *kafkaSource) Name() string {
	name := strings.ReplaceAll(runtime.SafeName(s.topic), "-", "_")
	if name == "" {
		return "kafka"
	}
	return name
}

func (s *kafkaSource) Replayable() bool     { return true }
func (s *kafkaSource) RecordFormat() string { return s.format }
func (s *kafkaSource) SeqGaps() bool        { return true }

// modeAllNamed is the mode of a checkpoint that names every partition
// the route reads, an idle one too (Open).
const modeAllNamed = "partitions, all named"

// Position keeps every partition's next offset, unless a consumer group
// keeps them.
func (s *kafkaSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	if s.groupID != "" {
		return checkpoint.Position{}, false
	}
	pos := checkpoint.Position{Source: "kafka:" + s.topic, Mode: modeAllNamed, Partitions: map[int32]int64{}}
	for part, c := range committed {
		pos.Partitions[part] = int64(c.Next)
	}
	return pos, true
}

func (s *kafkaSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, host runtime.SourceHost) error {
	s.host = host
	fctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	// The topic must exist and the brokers accept us before anything
	// starts: a group would otherwise retry its join forever.
	parts, err := s.partitions(ctx)
	if err != nil {
		stop()
		return err
	}
	if s.groupID != "" {
		return s.openGroup(fctx)
	}
	fromCP := haveCP && cp.Source == "kafka:"+s.topic
	s.resumed = map[int32]runtime.AckPos{}
	// A partition the checkpoint does not name was added to the topic
	// since: it is read from offset 0, checked to be there. At the
	// route's first start each partition is read from the first offset
	// it keeps, and every partition is named in the checkpoints from
	// then on (an idle one too), so one added later is known for new.
	// (A checkpoint of an mqb before that named only the partitions it
	// had read from: one it does not name may be idle since the route's
	// first start, and is read from its first offset too.)
	offsets, resumed := map[int]int64{}, 0
	var fresh []int
	for _, p := range parts {
		if o, ok := cp.Partitions[int32(p)]; fromCP && ok {
			offsets[p] = o
			resumed++
		} else if !fromCP || cp.Mode != modeAllNamed {
			fresh = append(fresh, p)
		}
	}
	if len(fresh) > 0 {
		b, err := s.waitAllBounds(ctx, fresh)
		if b == nil {
			stop()
			return cmp.Or(err, ctx.Err())
		}
		for _, p := range fresh {
			offsets[p] = b[p][0]
		}
	}
	reading := map[int]bool{}
	for _, p := range parts {
		off := offsets[p]
		s.resumed[int32(p)] = runtime.AckPos{Next: uint64(off), Offset: off}
		s.startFetch(fctx, p, off, 0)
		reading[p] = true
	}
	s.wg.Add(1)
	go s.watchPartitions(fctx, reading)
	s.log.Info("kafka source", "brokers", strings.Join(s.brokers, ","), "topic", s.topic,
		"partitions", len(parts), "resumed_partitions", resumed)
	return nil
}

// kafkaPartitionWatch is how often a source without a consumer group
// looks for partitions added to its topic (a group's leader does the same
// through kafka-go, WatchPartitionChanges).
var kafkaPartitionWatch = 5 * time.Second

// watchPartitions starts reading each partition added to the topic while
// the route runs, from offset 0: all it holds was written after the
// route started. Without it, what producers wrote there would wait for
// the route's next start, and the topic's retention could delete it
// first.
func (s *kafkaSource) watchPartitions(ctx context.Context, reading map[int]bool) {
	defer s.wg.Done()
	tick := time.NewTicker(kafkaPartitionWatch)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		parts, err := s.partitions(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				s.log.Warn("kafka source: listing the topic's partitions failed, trying again", "topic", s.topic, "err", plan.RedactURLs(err.Error()))
			}
			failing = true
			continue
		}
		failing = false
		for _, p := range parts {
			if reading[p] {
				continue
			}
			reading[p] = true
			s.log.Info("kafka source: a partition was added to the topic; reading it from offset 0", "topic", s.topic, "partition", p)
			s.startFetch(ctx, p, 0, 0)
		}
	}
}

// partitions lists the topic's partitions; the topic must exist.
// ResumeAt seeds the route's tracking with the checkpointed offsets, so a
// partition with nothing new keeps its position in the next checkpoint.
func (s *kafkaSource) ResumeAt() map[int32]runtime.AckPos { return s.resumed }

func (s *kafkaSource) partitions(ctx context.Context) ([]int, error) {
	tr := s.sec.transport()
	defer tr.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(s.brokers...), Timeout: 10 * time.Second, Transport: tr}
	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	md, err := client.Metadata(mctx, &kafkago.MetadataRequest{Topics: []string{s.topic}})
	if err != nil {
		return nil, fmt.Errorf("route %s: kafka source url: metadata from %s: %s", s.route, strings.Join(s.brokers, ","), plan.RedactURLs(kafkaAuthError(err, s.sec).Error()))
	}
	var parts []int
	for _, t := range md.Topics {
		if t.Name != s.topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("route %s: kafka source topic %s: %v", s.route, s.topic, t.Error)
		}
		for _, p := range t.Partitions {
			parts = append(parts, p.ID)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("route %s: kafka source topic: topic %s does not exist on %s", s.route, s.topic, strings.Join(s.brokers, ","))
	}
	sort.Ints(parts)
	return parts, nil
}

// startFetch reads partition part from offset into s.msgs until ctx ends.
func (s *kafkaSource) startFetch(ctx context.Context, part int, offset int64, gen uint32) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.fetch(ctx, part, offset, gen)
	}()
}

// checkOffset stops the route (outOfRange) when partition part no longer
// has offset, the next one the route reads, or does not have it yet: a
// Kafka reader set to it would start at the first offset there is, or
// wait for the partition to grow past it, and pass over the records in
// between without a word. FirstOffset and LastOffset are always there.
func (s *kafkaSource) checkOffset(ctx context.Context, part int, offset int64) error {
	if offset < 0 {
		return nil
	}
	first, last, err := s.waitBounds(ctx, part)
	switch {
	case err != nil || ctx.Err() != nil:
		return err // nil when the route is stopping
	case offset < first || offset > last:
		return s.outOfRangeError(part, offset, first, last)
	}
	return nil
}

// waitBounds is partitionBounds, waiting for a broker that is down a
// while (a restart) rather than failing: it returns an error only when
// the route is stopping.
func (s *kafkaSource) waitBounds(ctx context.Context, part int) (first, last int64, err error) {
	b, err := s.waitAllBounds(ctx, []int{part})
	if err != nil || b == nil {
		return 0, 0, err
	}
	return b[part][0], b[part][1], nil
}

// waitAllBounds is bounds, waiting as waitBounds does; nil when the route
// is stopping.
func (s *kafkaSource) waitAllBounds(ctx context.Context, parts []int) (map[int][2]int64, error) {
	for wait, try := 250*time.Millisecond, 1; ; try++ {
		b, err := s.bounds(ctx, parts)
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if try == 1 || try%10 == 0 {
			s.log.Warn("kafka source: reading the partitions' offsets failed, retrying", "partitions", fmt.Sprint(parts), "attempt", try, "err", plan.RedactURLs(err.Error()))
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// outOfRange is the error that stops the route when partition part has no
// record at offset, the route's next one: the records from there to the
// partition's first were deleted (the topic's retention, DeleteRecords)
// before the route read them, or offset is past the partition's end (the
// topic was deleted and made again). Jumping to the first offset there is,
// as a Kafka reader does by default, would lose them without a word.
func (s *kafkaSource) outOfRange(ctx context.Context, part int, offset int64) error {
	first, last, err := s.partitionBounds(ctx, part)
	if err != nil {
		return fmt.Errorf("route %s: kafka source topic %s partition %d: offset %d is out of the partition's range, and reading its first and last offsets failed: %s", s.route, s.topic, part, offset, plan.RedactURLs(err.Error()))
	}
	return s.outOfRangeError(part, offset, first, last)
}

// outOfRangeError says why offset, outside first..last (the partition's
// first offset and the one after its last record), stops the route.
func (s *kafkaSource) outOfRangeError(part int, offset, first, last int64) error {
	where := fmt.Sprintf("route %s: kafka source topic %s partition %d", s.route, s.topic, part)
	moveTo := fmt.Sprintf("mqbc state reset FILE %s (the route then starts at the earliest offset the topic keeps; a record still there is read again)", s.route)
	if s.groupID != "" {
		moveTo = fmt.Sprintf("set group %s's committed offset of partition %d to %d with your Kafka tools", s.groupID, part, first)
	}
	if offset >= first && offset <= last {
		return fmt.Errorf("%s: the broker refused offset %d as out of range, and now says the partition holds offsets %d to %d; the route stops rather than guess which records it would pass over. A rerun resumes at offset %d", where, offset, first, last, offset)
	}
	if offset < first {
		return fmt.Errorf("%s: the records at offsets %d to %d (%d) were deleted from the topic (its retention, or a DeleteRecords) before this route read them; the route stops rather than pass over them without a word. They cannot be read any more; to go on from offset %d, accepting their loss: %s",
			where, offset, first-1, first-offset, first, moveTo)
	}
	return fmt.Errorf("%s: the route's next offset %d is past the partition's end (%d): the topic was deleted and made again, or truncated, since the route read it; the route stops rather than skip what is written there up to offset %d. To read the partition from its start: %s",
		where, offset, last, offset, moveTo)
}

// partitionBounds reads the first offset partition part keeps and the
// offset after its last record.
func (s *kafkaSource) partitionBounds(ctx context.Context, part int) (first, last int64, err error) {
	b, err := s.bounds(ctx, []int{part})
	if err != nil {
		return 0, 0, err
	}
	return b[part][0], b[part][1], nil
}

// bounds reads, in one request, the first offset and the offset after the
// last record of each of parts.
func (s *kafkaSource) bounds(ctx context.Context, parts []int) (map[int][2]int64, error) {
	tr := s.sec.transport()
	defer tr.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(s.brokers...), Timeout: 10 * time.Second, Transport: tr}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req := make([]kafkago.OffsetRequest, 0, 2*len(parts))
	for _, p := range parts {
		req = append(req, kafkago.FirstOffsetOf(p), kafkago.LastOffsetOf(p))
	}
	res, err := client.ListOffsets(lctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{s.topic: req}})
	if err != nil {
		return nil, err
	}
	out := make(map[int][2]int64, len(parts))
	for _, po := range res.Topics[s.topic] {
		if po.Error != nil {
			return nil, po.Error
		}
		out[po.Partition] = [2]int64{po.FirstOffset, po.LastOffset}
	}
	for _, p := range parts {
		if _, ok := out[p]; !ok {
			return nil, fmt.Errorf("the broker did not answer for partition %d", p)
		}
	}
	return out, nil
}

func (s *kafkaSource) fatal(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

// openGroup joins the consumer group; generations are handled in the
// background as the group assigns and revokes partitions.
func (s *kafkaSource) openGroup(ctx context.Context) error {
	g, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		Dialer:      s.sec.dialer(),
		ID:          s.groupID,
		Brokers:     s.brokers,
		Topics:      []string{s.topic},
		StartOffset: kafkago.FirstOffset,
		// The leader rebalances the group when partitions are added, so
		// what is written there is read without waiting for a member to
		// come or go.
		WatchPartitionChanges:  true,
		PartitionWatchInterval: kafkaPartitionWatch,
		HeartbeatInterval:      time.Second,
		SessionTimeout:         s.session,
		RebalanceTimeout:       2 * kafkaRevokeWait,
		JoinGroupBackoff:       500 * time.Millisecond,
		Timeout:                10 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("route %s: kafka source group_id %s: %s", s.route, s.groupID, plan.RedactURLs(err.Error()))
	}
	s.group = g
	s.log.Info("kafka source", "brokers", strings.Join(s.brokers, ","), "topic", s.topic, "group_id", s.groupID)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			gen, err := g.Next(ctx)
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, kafkago.ErrGroupClosed) {
					return
				}
				s.log.Warn("kafka source: joining the consumer group failed, retrying", "group_id", s.groupID, "err", plan.RedactURLs(err.Error()))
				continue
			}
			s.startGeneration(gen)
		}
	}()
	return nil
}

// startGeneration starts fetching the partitions gen assigns and a watcher
// that, when the generation ends, drains and commits them.
func (s *kafkaSource) startGeneration(gen *kafkago.Generation) {
	s.genMu.Lock()
	id := s.genID.Add(1)
	s.gen = gen
	s.assigned = map[int32]bool{}
	s.unsent = map[int32]int64{}
	var parts []int32
	for _, pa := range gen.Assignments[s.topic] {
		s.assigned[int32(pa.ID)] = true
		parts = append(parts, int32(pa.ID))
	}
	s.draining.Store(false)
	s.genMu.Unlock()
	s.log.Info("kafka source: partitions assigned", "group_id", s.groupID, "generation", gen.ID, "partitions", parts)
	for _, pa := range gen.Assignments[s.topic] {
		gen.Start(func(ctx context.Context) { s.fetch(ctx, pa.ID, pa.Offset, id) })
	}
	gen.Start(func(ctx context.Context) {
		<-ctx.Done()
		s.draining.Store(true) // what is still buffered is the next owner's
		if err := s.host.Revoke(parts, kafkaRevokeWait); err != nil {
			s.log.Warn("kafka source: commit on revoke failed", "group_id", s.groupID, "err", plan.RedactURLs(err.Error()))
		}
		s.genMu.Lock()
		s.assigned = map[int32]bool{}
		s.genMu.Unlock()
		s.log.Info("kafka source: partitions revoked", "group_id", s.groupID, "generation", gen.ID, "partitions", parts)
	})
}

// Commit commits the group offsets of partitions that moved, each the
// offset after its contiguous acked prefix. Only partitions of the current
// generation that were read under it are committed: a partition revoked in
// between belongs to another member now. A failed commit is logged and
// retried with the next one; the records stay uncommitted (read again
// after a restart), never skipped.
func (s *kafkaSource) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	if s.groupID == "" {
		return nil
	}
	s.genMu.Lock()
	defer s.genMu.Unlock()
	if s.gen == nil {
		return nil
	}
	id := s.genID.Load()
	for part, pos := range changed {
		if pos.Gen == id && s.assigned[part] {
			s.unsent[part] = int64(pos.Next)
		}
	}
	if len(s.unsent) == 0 {
		return nil
	}
	offsets := map[int]int64{}
	for part, off := range s.unsent {
		offsets[int(part)] = off
	}
	if err := s.gen.CommitOffsets(map[string]map[int]int64{s.topic: offsets}); err != nil {
		s.log.Warn("kafka source: offset commit failed, retrying with the next one", "group_id", s.groupID, "err", plan.RedactURLs(err.Error()))
		return nil
	}
	clear(s.unsent)
	return nil
}

// Next returns the messages fetched so far, waiting for the first.
func (s *kafkaSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 256))
	for b.Len() == 0 {
		select {
		case <-ctx.Done():
			return b, false, nil
		case err := <-s.errs:
			return nil, false, err
		case km := <-s.msgs:
			s.add(b, km)
		}
	}
	for b.Len() < max {
		select {
		case km := <-s.msgs:
			s.add(b, km)
		default:
			return b, false, nil
		}
	}
	return b, false, nil
}

func (s *kafkaSource) add(b *runtime.Batch, km kafkaMsg) {
	if s.groupID != "" && (km.gen != s.genID.Load() || s.draining.Load()) {
		return // read under a generation that has ended
	}
	m := &km.m
	payload := m.Value
	if payload == nil && s.format == "json" {
		// A tombstone (a null value: a compacted topic's delete of its
		// key) is the JSON null, not a line that fails to decode.
		payload = jsonNull
	}
	r := runtime.Record{
		Payload:   payload,
		Partition: int32(m.Partition),
		Seq:       uint64(m.Offset),
		Next:      m.Offset + 1,
	}
	r.SetGeneration(km.gen)
	if id, ok := kafkaMessageID(m); ok {
		r.SetMessageID(id)
	}
	if s.producerIDReason != "" && !kafkaStamped(m) {
		r.DeadLetter(runtime.MissingProducerID("an "+runtime.HeaderMessageID+" header", s.producerIDReason))
	}
	if len(m.Headers) > 0 || s.metadata {
		r.Meta = make(map[string]string, len(m.Headers)+3)
	}
	for _, h := range m.Headers {
		if h.Key != runtime.HeaderMessageID {
			r.Meta[h.Key] = string(h.Value)
		}
	}
	if s.metadata {
		r.Meta[metaSrcTopic] = m.Topic
		r.Meta[metaSrcPartition] = strconv.Itoa(m.Partition)
		r.Meta[metaSrcOffset] = strconv.FormatInt(m.Offset, 10)
		if len(m.Key) > 0 { // the client reads a null key as empty
			r.Meta[metaSrcKey] = string(m.Key)
		}
	}
	b.Add(r)
}

// jsonNull is a tombstone's payload under format = json.
var jsonNull = []byte("null")

// kafkaMessageID is the identity the spec gives a Kafka record: the
// mq_bridge.message_id header (UUID text, as our sinks write it, or 16 raw
// bytes), else a 16-byte key, else partition<<64 | offset. Each is stable
// across replays.
func kafkaMessageID(m *kafkago.Message) (uuid.UUID, bool) {
	for _, h := range m.Headers {
		if h.Key != runtime.HeaderMessageID {
			continue
		}
		if len(h.Value) == 16 {
			return uuid.UUID(h.Value), true
		}
		if id, err := uuid.ParseBytes(h.Value); err == nil {
			return id, true
		}
	}
	if len(m.Key) == 16 {
		return uuid.UUID(m.Key), true
	}
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], uint64(m.Partition))
	binary.BigEndian.PutUint64(id[8:], uint64(m.Offset))
	return id, true
}

// kafkaStamped says whether the record's producer stamped its id: an
// mq_bridge.message_id header that parses. An id derived from the key or
// the offset is stable across replays of that offset, not across a
// producer's retry that wrote the record twice.
func kafkaStamped(m *kafkago.Message) bool {
	for _, h := range m.Headers {
		if h.Key != runtime.HeaderMessageID {
			continue
		}
		if len(h.Value) == 16 {
			return true
		}
		if _, err := uuid.ParseBytes(h.Value); err == nil {
			return true
		}
	}
	return false
}

func (s *kafkaSource) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if s.group != nil {
		err = s.group.Close() // ends the generation: its watcher commits what is acked
	}
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	return err
}

// RequireProducerID: a route whose proof rests on ids its producers stamp
// (a dedup keyed on message_id) dead-letters a record that carries none,
// instead of letting an id derived from the key or the offset stand in
// for it (kafkaStamped).
func (s *kafkaSource) RequireProducerID(reason string) { s.producerIDReason = reason }
