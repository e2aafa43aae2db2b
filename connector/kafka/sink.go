package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// kafkaSink publishes each write through its partitions' lanes (lane.go):
// one Produce request out per partition at a time (acks from all in-sync
// replicas), the partitions in parallel and each partition's records in
// order, sent while the write is still building the rest. A broker cannot absorb a repeat: a
// retried write may land twice, so the route is at-least-once unless a
// dedup step filters before it.
//
// It drives kafka-go's Client rather than its Writer: the Writer looks up
// the topic's metadata and balances once per message and copies every
// message into per-partition batches, which cost more than the encoding.
// It sends the record batches it encodes (RawProduce), not kafka-go's, and
// places records on partitions itself (hashPartition, spread): kafka-go's
// Hash balancer took a mutex for every keyless record and a pooled hasher
// for every keyed one.
type kafkaSink struct {
	route     string
	topic     string
	key       *runtime.Template
	transport *kafkago.Transport
	client    *kafkago.Client
	sec       kafkaSecurity
	// spread is the round-robin counter of keyless records: a write
	// takes a block of it, one atomic step, and places its records from
	// there (keyed records go by hashPartition).
	spread atomic.Uint32

	buffers sync.Pool // of *kafkaWriteBuffers: those of writes that succeeded

	mu         sync.Mutex
	partitions []int            // 0..n-1
	counted    time.Time        // when the partition count was last read
	lanes      []*partitionLane // by partition, started on its first record (lane.go)
	laneWG     sync.WaitGroup
}

// kafkaMaxMessageBytes is the broker default message.max.bytes, the limit on
// one record batch: a larger record fails alone, and a partition's records
// go out in chunks under it.
const kafkaMaxMessageBytes = 1 << 20

// kafkaMaxBatchRecords is the most the records of one batch may add up to.
const kafkaMaxBatchRecords = kafkaMaxMessageBytes - kafkaBatchOverhead

// kafkaRecordOverhead bounds a record's framing in a v2 record batch
// (length, attributes, deltas, key and value lengths, header count), and
// kafkaHeaderOverhead a header's; kafkaBatchOverhead is the batch header.
const (
	kafkaRecordOverhead = 64
	kafkaHeaderOverhead = 8
	kafkaBatchOverhead  = 128
)

// kafkaRecountEvery is how often a sink rereads the topic's partition
// count, so records reach partitions added while it runs.
const kafkaRecountEvery = 10 * time.Second

func kafkaBrokers(raw string) ([]string, error) {
	raw = strings.TrimPrefix(raw, "kafka://")
	var out []string
	for _, b := range strings.Split(raw, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		if strings.Contains(b, "@") {
			return nil, errors.New("credentials in the broker list are not accepted: set username and password (and sasl_mechanism)")
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

// kafkaSinkConfig is a kafka sink's attributes.
type kafkaSinkConfig struct {
	kafkaConfig
	PartitionKey []plan.Part `attr:"partition_key"`
}

func newKafkaSink(b *runtime.BuildEnv, cfg *kafkaSinkConfig) (*kafkaSink, error) {
	brokers, err := kafkaBrokersOf(b)
	if err != nil {
		return nil, err
	}
	if cfg.Topic == "" {
		return nil, b.Errorf("topic", "required")
	}
	key, err := b.Template("partition_key")
	if err != nil {
		return nil, err
	}
	sec, err := kafkaSecurityFrom(b, &cfg.kafkaSecurityConfig)
	if err != nil {
		return nil, err
	}
	s, err := dialKafkaSink(b.Context(), b.Route(), brokers, cfg.Topic, sec)
	if err != nil {
		attr := "url"
		if errors.Is(err, errKafkaTopic) {
			attr = "topic"
		}
		return nil, b.Errorf(attr, "%s", plan.RedactURLs(err.Error()))
	}
	s.key = key
	s.warnDurability(b.Context(), b.Logger())
	b.Logger().Info("kafka sink", "brokers", strings.Join(brokers, ","), "topic", cfg.Topic, "partitions", len(s.partitions))
	return s, nil
}

// warnDurability warns when the topic can lose a write the broker
// acknowledged, which the route counts as delivered: the sink writes with
// acks=all, which waits for the partition's in-sync replicas only. One
// replica (a crash of its broker before the page cache reaches the disk,
// or the loss of its disk, loses what it had), min.insync.replicas 1 (the
// in-sync replicas may be the leader alone), and unclean leader election
// (a replica that missed writes may become the leader) each allow that.
func (s *kafkaSink) warnDurability(ctx context.Context, log *slog.Logger) {
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	replicas := 0
	md, err := s.client.Metadata(qctx, &kafkago.MetadataRequest{Topics: []string{s.topic}})
	if err == nil {
		for _, t := range md.Topics {
			for _, p := range t.Partitions {
				if t.Name == s.topic && (replicas == 0 || len(p.Replicas) < replicas) {
					replicas = len(p.Replicas)
				}
			}
		}
	}
	var cfg map[string]string
	if err == nil {
		cfg, err = s.topicConfig(qctx, "min.insync.replicas", "unclean.leader.election.enable")
	}
	if err != nil {
		log.Warn("kafka sink: could not read the topic's replication settings; a write counts as delivered once the in-sync replicas acknowledge it",
			"topic", s.topic, "err", plan.RedactURLs(err.Error()))
		return
	}
	var why []string
	minISR, _ := strconv.Atoi(cfg["min.insync.replicas"])
	switch {
	case replicas == 1:
		why = append(why, "the topic has one replica: a crash of its broker before the written pages reach the disk, or the loss of that disk, loses what it acknowledged")
	case minISR < 2:
		why = append(why, fmt.Sprintf("min.insync.replicas is %s: the in-sync replicas that acknowledge a write may be the leader alone, and its crash loses what only it had", cmp.Or(cfg["min.insync.replicas"], "not set")))
	}
	if cfg["unclean.leader.election.enable"] == "true" {
		why = append(why, "unclean.leader.election.enable is true: a replica that missed acknowledged writes may become the leader and drop them")
	}
	if len(why) > 0 {
		log.Warn("kafka sink: the topic can lose writes the broker acknowledged, which the route counts as delivered ("+strings.Join(why, "; ")+
			"); give the topic a replication factor of 3 or more, min.insync.replicas 2 or more, and no unclean leader election",
			"topic", s.topic, "replicas", replicas, "min_insync_replicas", cfg["min.insync.replicas"])
	}
}

// topicConfig reads the named settings of the sink's topic as the broker
// applies them (the topic's own, or the broker's default).
func (s *kafkaSink) topicConfig(ctx context.Context, names ...string) (map[string]string, error) {
	res, err := s.client.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{Resources: []kafkago.DescribeConfigRequestResource{{
		ResourceType: kafkago.ResourceTypeTopic, ResourceName: s.topic, ConfigNames: names}}})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range res.Resources {
		if r.Error != nil {
			return nil, r.Error
		}
		for _, e := range r.ConfigEntries {
			out[e.ConfigName] = e.ConfigValue
		}
	}
	return out, nil
}

// dialKafkaSink connects a sink for route to topic, which must exist: a
// typo would otherwise create a topic on brokers that auto-create, or fail
// every batch later.
func dialKafkaSink(ctx context.Context, route string, brokers []string, topic string, sec kafkaSecurity) (*kafkaSink, error) {
	s := &kafkaSink{route: route, topic: topic, sec: sec}
	s.transport = sec.transport()
	s.client = &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 30 * time.Second, Transport: s.transport}
	mctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	n, err := s.countPartitions(mctx)
	if err == nil {
		err = s.checkProduceVersion(mctx)
	}
	if err != nil {
		s.transport.CloseIdleConnections()
		return nil, err
	}
	s.setPartitions(n)
	return s, nil
}

// kafkaProduceVersion is the oldest Produce request version that carries
// record batches of format v2, the only one the sink writes (Kafka 0.11).
const kafkaProduceVersion = 3

// checkProduceVersion refuses a broker too old for the record batches the
// sink writes, before any record is sent.
func (s *kafkaSink) checkProduceVersion(ctx context.Context) error {
	res, err := s.client.ApiVersions(ctx, &kafkago.ApiVersionsRequest{})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		return fmt.Errorf("api versions from %s: %w", s.client.Addr, kafkaAuthError(err, s.sec))
	}
	for _, k := range res.ApiKeys {
		if k.ApiKey == int(protocol.Produce) {
			if k.MaxVersion < kafkaProduceVersion {
				return fmt.Errorf("broker %s speaks Produce up to v%d; the kafka sink needs v%d (Kafka 0.11 or later)", s.client.Addr, k.MaxVersion, kafkaProduceVersion)
			}
			return nil
		}
	}
	return fmt.Errorf("broker %s does not list the Produce request", s.client.Addr)
}

// countPartitions reads the topic's partition count from the cluster.
func (s *kafkaSink) countPartitions(ctx context.Context) (int, error) {
	md, err := s.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{s.topic}})
	if err != nil {
		return 0, fmt.Errorf("metadata from %s: %w", s.client.Addr, kafkaAuthError(err, s.sec))
	}
	for _, t := range md.Topics {
		if t.Name != s.topic {
			continue
		}
		if t.Error != nil {
			return 0, fmt.Errorf("%w %s: %w", errKafkaTopic, s.topic, t.Error)
		}
		if len(t.Partitions) > 0 {
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("%w %s does not exist on %s", errKafkaTopic, s.topic, s.client.Addr)
}

// errKafkaTopic marks an error about the topic rather than the brokers.
var errKafkaTopic = errors.New("topic")

func (s *kafkaSink) setPartitions(n int) {
	ps := make([]int, n)
	for i := range ps {
		ps[i] = i
	}
	s.mu.Lock()
	s.partitions, s.counted = ps, time.Now()
	s.mu.Unlock()
}

// currentPartitions returns the partition list, rereading the count when
// it is older than kafkaRecountEvery (a failed reread keeps the old one:
// the produce requests will say whether the cluster is reachable).
func (s *kafkaSink) currentPartitions(ctx context.Context) []int {
	s.mu.Lock()
	ps, stale := s.partitions, time.Since(s.counted) > kafkaRecountEvery
	if stale {
		s.counted = time.Now()
	}
	s.mu.Unlock()
	if stale {
		if n, err := s.countPartitions(ctx); err == nil && n != len(ps) {
			s.setPartitions(n)
			s.mu.Lock()
			ps = s.partitions
			s.mu.Unlock()
		}
	}
	return ps
}

func (s *kafkaSink) programs() []*runtime.Program {
	if s.key == nil {
		return nil
	}
	return s.key.Programs()
}

// kafkaOut is one record ready to produce. Its key and its headers other
// than the message id are encoded already, as a record batch holds them,
// in the write's arena (enc); the lane writes the rest from the record
// itself (payload, message id) when it encodes the request: a write of
// many records then holds 48 bytes and an arena entry of a few for each,
// not copies of what the record has.
type kafkaOut struct {
	rec    *runtime.Record
	enc    []byte // key field (length, or -1 for none), then the headers from meta
	keyEnd int32  // where the headers start in enc
	extra  int32  // headers in enc
	size   int32  // bytes it adds to a record batch, an upper bound
}

// kafkaIDHeaderSize is the encoded size of the message-id header the
// lane adds to each record: name and 36-character text, with lengths.
var kafkaIDHeaderSize = varintSize(int64(len(runtime.HeaderMessageID))) + len(runtime.HeaderMessageID) + varintSize(36) + 36

// start begins m's encoded fields, for the record rec, at the end of
// *arena with its key: none (a null key) unless hasKey.
func (m *kafkaOut) start(arena *[]byte, rec *runtime.Record, key string, hasKey bool) {
	from := len(*arena)
	if hasKey {
		*arena = binary.AppendVarint(*arena, int64(len(key)))
		*arena = append(*arena, key...)
	} else {
		*arena = binary.AppendVarint(*arena, -1)
	}
	*m = kafkaOut{rec: rec, enc: (*arena)[from:len(*arena):len(*arena)], keyEnd: int32(len(*arena) - from)}
}

// key is m's key, nil for none.
func (m *kafkaOut) key() []byte {
	n, w := binary.Varint(m.enc)
	if n < 0 {
		return nil
	}
	return m.enc[w:m.keyEnd]
}

// addHeader appends header k=v to m's encoded fields, which must be the
// last thing in *arena. enc is capacity-clipped, so later appends to the
// arena, by this record or the next, never write over it.
func (m *kafkaOut) addHeader(arena *[]byte, k, v string) {
	from := len(*arena) - len(m.enc)
	*arena = binary.AppendVarint(*arena, int64(len(k)))
	*arena = append(*arena, k...)
	*arena = binary.AppendVarint(*arena, int64(len(v)))
	*arena = append(*arena, v...)
	m.enc = (*arena)[from:len(*arena):len(*arena)]
	m.extra++
}

// build fills m from r: key from partition_key and every forwarded meta
// entry as a header, encoded into *arena (the payload and message id are
// read from r when the request is encoded).
func (s *kafkaSink) build(r *runtime.Record, m *kafkaOut, arena *[]byte) error {
	if err := r.EncodePayload(); err != nil {
		return err
	}
	var key string
	if s.key != nil {
		k, err := s.key.Render(r)
		if err != nil {
			return err
		}
		key = k
	}
	m.start(arena, r, key, s.key != nil)
	if len(r.Meta) > 0 {
		for _, k := range runtime.ForwardedMeta(r) {
			m.addHeader(arena, k, r.Meta[k])
		}
	}
	size := len(m.enc) + len(r.Payload) + kafkaRecordOverhead + kafkaIDHeaderSize
	if size > kafkaMaxBatchRecords {
		return fmt.Errorf("kafka: record of %d bytes exceeds the %d-byte message limit", size, kafkaMaxMessageBytes)
	}
	m.size = int32(size)
	return nil
}

// hashPartition is the partition, of n, of a record with key: kafka-go's
// Hash balancer's choice (sarama's: FNV-1a of the key as an int32, modulo
// n, made positive), computed here without its hasher pool. An empty key
// is a key and hashes too; only a record without one goes round-robin.
func hashPartition(key []byte, n int) int {
	h := uint32(2166136261) // FNV-1a 32-bit offset basis
	for _, c := range key {
		h ^= uint32(c)
		h *= 16777619 // FNV-1a 32-bit prime
	}
	p := int32(h) % int32(n)
	if p < 0 {
		p = -p
	}
	return int(p)
}

// appendUUIDText appends u's canonical 36-character text form to buf.
func appendUUIDText(buf []byte, u uuid.UUID) []byte {
	var t [36]byte
	hex.Encode(t[0:8], u[0:4])
	t[8] = '-'
	hex.Encode(t[9:13], u[4:6])
	t[13] = '-'
	hex.Encode(t[14:18], u[6:8])
	t[18] = '-'
	hex.Encode(t[19:23], u[8:10])
	t[23] = '-'
	hex.Encode(t[24:], u[10:])
	return append(buf, t[:]...)
}

func (s *kafkaSink) Write(ctx context.Context, recs []*runtime.Record) error {
	// Every record is stamped with its message id: mint the fresh ones at
	// one clock reading rather than one each.
	runtime.MintMessageIDs(recs)
	// msgs is never grown: lanes read the entries handed to them while
	// later ones are built. Their encoded keys and headers are slices of
	// one arena (capacity-clipped: growing it moves nothing handed out and
	// writes over none of it).
	buf := s.writeBuffers(len(recs))
	msgs, arena := buf.msgs, buf.arena
	ps := s.currentPartitions(ctx)
	w := &laneWrite{msgs: msgs, time: time.Now(), errs: make([]error, len(ps))}
	open := make([]laneSegment, len(ps)) // each partition's segment being filled
	counts := make([]int, len(ps))
	// Keyless records take turns from where the writes before left off.
	turn := s.spread.Add(uint32(len(recs))) - uint32(len(recs))
	for i, r := range recs {
		m := &msgs[i]
		if err := s.build(r, m, &arena); err != nil {
			r.Refuse(err.Error())
			continue
		}
		var p int
		if s.key != nil {
			p = hashPartition(m.key(), len(ps))
		} else {
			p = int(turn % uint32(len(ps)))
			turn++
		}
		seg := &open[p]
		if len(seg.idx) > 0 && seg.size+int(m.size) > kafkaMaxBatchRecords {
			s.hand(p, w, *seg)
			*seg = laneSegment{}
		}
		seg.idx = append(seg.idx, int32(i))
		seg.size += int(m.size)
		counts[p]++
		if seg.size >= kafkaSegmentBytes {
			s.hand(p, w, *seg)
			*seg = laneSegment{}
		}
	}
	for p, seg := range open {
		if len(seg.idx) > 0 {
			s.hand(p, w, seg)
		}
	}
	w.pending.Wait()
	buf.arena = arena // as grown
	failed, total := 0, 0
	var first error
	for p, err := range w.errs {
		total += counts[p]
		if err != nil {
			failed += counts[p]
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		// A broker cannot tell a retried message from a new one, so a
		// retry may publish part of the batch twice: at-least-once.
		return runtime.Retryable(fmt.Errorf("route %s: kafka sink topic %s: %d of %d messages failed, first: %w",
			s.route, s.topic, failed, total, first))
	}
	// Every request of this write was answered, so nothing reads its
	// buffers any more.
	s.recycle(buf)
	return nil
}

// kafkaWriteBuffers are the arrays one Write builds its records in. A sink
// keeps those of a write that succeeded for the next: allocating them
// afresh for every write, and the collector's work on them, cost more than
// building the records.
type kafkaWriteBuffers struct {
	msgs  []kafkaOut
	arena []byte
}

// kafkaArenaPerRecord is what a write's arena starts with for each
// record: a null key and no header from meta take one byte.
const kafkaArenaPerRecord = 4

// writeBuffers returns buffers for a write of n records: msgs of length n,
// arena empty.
func (s *kafkaSink) writeBuffers(n int) *kafkaWriteBuffers {
	b, _ := s.buffers.Get().(*kafkaWriteBuffers)
	if b == nil {
		b = &kafkaWriteBuffers{}
	}
	if cap(b.msgs) < n {
		b.msgs = make([]kafkaOut, n)
	}
	b.msgs = b.msgs[:n]
	if want := n * kafkaArenaPerRecord; cap(b.arena) < want {
		b.arena = make([]byte, 0, want)
	}
	b.arena = b.arena[:0]
	return b
}

// recycle keeps b for a later write, dropping what it points to (the
// records) so that a kept buffer holds no write's data.
func (s *kafkaSink) recycle(b *kafkaWriteBuffers) {
	clear(b.msgs)
	s.buffers.Put(b)
}

// kafkaProduceAttempts and kafkaProduceBackoff bound how a chunk rides
// out a leader election or a broker restart before the write fails (as
// kafka-go's Writer did, with a little more patience): a route without a
// retry step would otherwise stop at the first hiccup.
const (
	kafkaProduceAttempts   = 5
	kafkaProduceBackoff    = 100 * time.Millisecond
	kafkaProduceMaxBackoff = time.Second
)

// produceBatch sends batch, one encoded record batch (recordbatch.go),
// to partition p, again while the error is one a later attempt can get
// past. A batch sent again after a lost response may land twice: the sink
// is at-least-once.
func (s *kafkaSink) produceBatch(ctx context.Context, p int, batch []byte) error {
	wait := kafkaProduceBackoff
	for attempt := 1; ; attempt++ {
		res, err := s.client.RawProduce(ctx, &kafkago.RawProduceRequest{
			Topic:        s.topic,
			Partition:    p,
			RequiredAcks: kafkago.RequireAll,
			RawRecords:   protocol.RawRecordSet{Reader: bytes.NewReader(batch)},
		})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err == nil && len(res.RecordErrors) > 0 {
			for i, rerr := range res.RecordErrors {
				err = fmt.Errorf("record %d: %w", i, rerr)
				break
			}
		}
		if err == nil {
			return nil
		}
		var kerr kafkago.Error
		if attempt >= kafkaProduceAttempts || ctx.Err() != nil || (errors.As(err, &kerr) && !kerr.Temporary()) {
			if attempt > 1 {
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return err
		}
		// The leader may have moved: forget the cached metadata.
		s.transport.CloseIdleConnections()
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, kafkaProduceMaxBackoff)
	}
}

// ReleasesRecords says the sink keeps nothing of a record once Write
// returned (see runtime.ReleasingSink), so the route reuses its batches
// instead of allocating each one's records and payload arena anew. Write
// returns only when every segment it handed a lane is done, and a lane
// copies a segment's payloads and message ids into its own request
// buffer before sending (appendRecordSet), so after Write nothing reads
// a record: not a request still out after a timeout (it sends from the
// lane's buffer), nor a write's kafkaOut entries (cleared or dropped).
func (s *kafkaSink) ReleasesRecords() bool { return true }

var _ runtime.ReleasingSink = (*kafkaSink)(nil)

// kafkaWriteSize is how many records a write takes (runtime.WriteSizer):
// the lanes send each partition's records while the write still builds,
// and gather what concurrent writes hand them, so a write of a few
// thousand records keeps them busy; the route's default of 16 read
// batches a write only kept more batches in memory. On a file → Kafka
// route of 500k records (go run ./bench/kafka -only publish -mqbc BIN,
// 7 alternating runs) groups of 16 batches of 4096 records took 0.84 µs
// of CPU a record and a peak RSS of 153 MiB, one batch 0.52 µs and 84
// MiB; at batch_size 1024, groups of 16 0.62 µs and 97 MiB, of 4 0.54 µs
// and 75 MiB.
const kafkaWriteSize = 4096

// WriteSize implements runtime.WriteSizer.
func (s *kafkaSink) WriteSize() int { return kafkaWriteSize }

var _ runtime.WriteSizer = (*kafkaSink)(nil)

func (s *kafkaSink) Close() error {
	s.closeLanes()
	s.transport.CloseIdleConnections()
	return nil
}
