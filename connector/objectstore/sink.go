package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// objectSink writes whole immutable objects to a bucket prefix or a local
// directory (object_store). Under name_by = write_time each write of the
// route is one object (or several, cut at max_object_bytes) named by a
// UUIDv7, so names sort in write order. Under name_by = source_position the
// write is cut into runs of consecutive element positions (records, or the
// elements an unnest made of them) and each run is one object (or several,
// cut at max_object_bytes, possibly inside a record's elements) named
// part-<source>-<partition>-<span>.<ext> (runtime.PartSpan), numbers
// zero-padded so that a bucket's lexicographic listing is replay order.
//
// The positional path recognises a replay without a checkpoint protocol:
// before its first write it lists the prefix once and parses the covered
// spans out of the part names, then skips covered elements one by one, so
// batch boundaries may differ between runs. Until a listing succeeds
// nothing is written (see ensureListed). A repeat that lands on the same
// name is caught as well, since every put carries a does-not-exist
// precondition and "already exists" is success.
type objectSink struct {
	route       string
	node        string // the plan node, which premises name
	log         *slog.Logger
	store       objectStore
	opened      objectStore // store before any test hook wrapped it
	ext         string      // ".jsonl", ".jsonl.gz", …
	contentType string
	compression string
	maxBytes    int
	zstd        *zstd.Encoder

	// write_time
	datePartition bool
	now           func() time.Time

	// source_position
	positional bool
	src        runtime.Source // names the parts, once open
	epoch      string         // a follow source's run epoch
	source     string         // the source's name in part names (with its run epoch); set by ensureListed
	legacy     []string

	mu     sync.Mutex
	listed bool // the prefix was listed: covered holds every part
	// covered holds the ranges of every part under the prefix: found by
	// the listing (also in before, records of an earlier run: duplicates)
	// or written since (by an earlier attempt of a retried write: the
	// records are out, just not written again).
	covered runtime.PartitionRanges
	before  runtime.PartitionRanges
	// routeSink: the route's own sink (MarkRouteSink), not a branch of a
	// structural output nor a handler.
	routeSink bool
}

// MarkRouteSink tells the sink it is the route's own sink: a record in a
// part of an earlier run is then counted as deduplicated. In a branch
// (a fanout's target) the record is the other branches' too and keeps
// its state: marked a duplicate there, a refusal by another target was
// dropped and the record acked without reaching the DLQ (soundness seed
// 16001: a kill after the part was written, before the record's
// dead-letter write).
func (s *objectSink) MarkRouteSink() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routeSink = true
}

// objectStoreHook, when set (by tests), wraps every store a sink opens.
var objectStoreHook func(objectStore) objectStore

// objectPartRE parses an object_store part name. The extension is not
// checked, but for starting with a letter (so that it cannot be taken for
// an element index): a part covers its span whatever its compression.
var objectPartRE = lazyre.New(`^part-(.+)-(\d{10})-(` + runtime.PartSpanPattern + `)\.[A-Za-z][^/]*$`)

func objectPartName(source string, partition int32, span runtime.PartSpan, ext string) string {
	return fmt.Sprintf("part-%s-%010d-%s%s", source, partition, span, ext)
}

// objectSinkConfig is an object_store sink's attributes (stdlib declares
// them).
type objectSinkConfig struct {
	// URL may call env(): RenderStatic renders it from the node, naming
	// the attribute in its errors.
	URL            []plan.Part `attr:"url"`
	NameBy         string      `attr:"name_by"`
	Idempotency    *plan.Value `attr:"idempotency"` // deprecated spelling of name_by
	Format         string      `attr:"format"`
	DatePartition  bool        `attr:"date_partition"`
	Compression    string      `attr:"compression"`
	MaxObjectBytes int64       `attr:"max_object_bytes"`
	Endpoint       string      `attr:"endpoint"`
	Region         string      `attr:"region"`
	PathStyle      bool        `attr:"path_style"`
}

func init() {
	runtime.RegisterSink("object_store", func(b *runtime.BuildEnv, cfg *objectSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newObjectSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, nil, nil
	}, runtime.ChecksPremises(plan.PremisePutIfAbsent))
}

func newObjectSink(b *runtime.BuildEnv, cfg *objectSinkConfig) (*objectSink, error) {
	rawURL, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &objectSink{
		route:         b.Route(),
		node:          b.NodeID(),
		log:           b.Logger(),
		datePartition: cfg.DatePartition,
		now:           time.Now,
		compression:   cfg.Compression,
		maxBytes:      int(cfg.MaxObjectBytes),
		covered:       runtime.PartitionRanges{},
		before:        runtime.PartitionRanges{},
	}
	if s.maxBytes <= 0 {
		return nil, b.Errorf("max_object_bytes", "must be positive, got %d", s.maxBytes)
	}
	switch f := cfg.Format; f {
	case "json":
		s.ext, s.contentType = ".jsonl", "application/x-ndjson"
	case "text":
		s.ext, s.contentType = ".txt", "text/plain; charset=utf-8"
	default:
		return nil, b.Errorf("format", "format %q is not supported by the object_store sink (json or text)", f)
	}
	switch s.compression {
	case "none", "":
		s.compression = "none"
	case "gzip":
		s.ext, s.contentType = s.ext+".gz", "application/gzip"
	case "zstd":
		s.ext, s.contentType = s.ext+".zst", "application/zstd"
		if s.zstd, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)); err != nil {
			return nil, b.Errorf("compression", "%v", err)
		}
	default:
		return nil, b.Errorf("compression", "unknown value %q", s.compression)
	}

	// A written name_by wins over the deprecated idempotency: whether it
	// was written is the node's to say, not the config's.
	nameBy := cfg.NameBy
	if !b.IsSet("name_by") {
		if v := cfg.Idempotency; v != nil && v.Type == plan.TBool {
			nameBy = map[bool]string{true: "source_position", false: "write_time"}[v.Bool]
		}
	}
	dlq, src := b.DeadLetterTarget(), b.Source()
	switch nameBy {
	case "auto":
		s.positional = !dlq && src != nil && src.Replayable()
	case "write_time":
	case "source_position":
		if dlq {
			return nil, b.Errorf("name_by", "a dead-letter object store is written by time; source_position is not supported there")
		}
		s.positional = true
	default:
		return nil, b.Errorf("name_by", "unknown value %q", nameBy)
	}
	if s.positional {
		// The source's name is taken when the prefix is listed: a file
		// source knows it (it names the file) only once open.
		s.src = src
		if !src.Replayable() {
			// Positions restart every run: an epoch keeps names distinct
			// and in run order (at-least-once across a restart).
			s.epoch = fmt.Sprintf("%020d", time.Now().UnixNano())
		}
		if s.datePartition {
			s.log.Info("object_store: date_partition is ignored under name_by = source_position: parts are written flat under the prefix")
		}
	}

	s3o, err := s3OptionsFor(b, rawURL, s3Options{Endpoint: cfg.Endpoint, Region: cfg.Region, PathStyle: cfg.PathStyle})
	if err != nil {
		return nil, err
	}
	if s.store, err = openObjectStore(b.Context(), rawURL, b.BaseDir(), s3o); err != nil {
		return nil, b.Errorf("url", "%s", plan.RedactURLs(err.Error()))
	}
	s.opened = s.store
	if objectStoreHook != nil {
		s.store = objectStoreHook(s.store)
	}
	scheme := "write_time"
	if s.positional {
		scheme = "source_position"
	}
	s.log.Info("object_store sink", "store", plan.RedactURLs(s.store.String()), "name_by", scheme, "compression", s.compression)
	return s, nil
}

// piece is the body of one object being assembled: under name_by =
// source_position, of the consecutive elements first through last.
type piece struct {
	first, last *runtime.Record
	body        []byte
	recs        int
}

func (s *objectSink) Write(ctx context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if !s.positional {
		return s.writeByTime(ctx, recs)
	}
	if err := s.ensureListed(ctx); err != nil {
		return err
	}
	live := make([]*runtime.Record, 0, len(recs))
	s.mu.Lock()
	for _, r := range recs {
		switch {
		case s.before.Contains(r):
			// In a part of an earlier run: as the route's sink, acked and
			// counted as deduplicated; in a branch, left as it is.
			if s.routeSink {
				r.MarkDuplicate()
			}
		case s.covered.Contains(r):
			// written by an earlier attempt of this write
		default:
			live = append(live, r)
		}
	}
	s.mu.Unlock()
	for _, run := range runtime.PositionRuns(live) {
		var p piece
		for _, r := range run {
			line, err := appendLine(nil, r)
			if err != nil {
				// A record that cannot be encoded fails alone and splits
				// the run: its position stays uncovered.
				r.Refuse(err.Error())
				if err := s.flushPart(ctx, &p); err != nil {
					return err
				}
				continue
			}
			// The run is consecutive and a refused element flushed what
			// came before it: p holds consecutive elements. A cut at the
			// size bound may fall inside a record's elements; the span
			// names say so.
			if p.recs > 0 && len(p.body)+len(line) > s.maxBytes {
				if err := s.flushPart(ctx, &p); err != nil {
					return err
				}
			}
			if p.recs == 0 {
				p.first = r
			}
			p.last = r
			p.body = append(p.body, line...)
			p.recs++
		}
		if err := s.flushPart(ctx, &p); err != nil {
			return err
		}
	}
	return nil
}

// listAttempts bounds the listings one write tries before giving up.
const listAttempts = 3

// ensureListed lists the prefix once, before the first positional write.
// A write never goes ahead blind: on different batch boundaries a replay
// names different objects, so only the listing can tell it is a replay.
// A failed listing is logged and tried again (a few times here, then on the
// route's next attempt at the batch, which this write fails as retryable);
// a denied one fails the route, naming the store.
func (s *objectSink) ensureListed(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed {
		return nil
	}
	source, legacy := s.src.Name(), []string(nil)
	if s.epoch != "" {
		source += "-" + s.epoch
	} else {
		legacy = runtime.LegacyPartSources(s.src)
	}
	var names []string
	var err error
	wait := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		names, err = s.store.List(lctx, s.partsPrefix(source))
		for _, l := range legacy {
			if err != nil {
				break
			}
			var more []string
			more, err = s.store.List(lctx, "part-"+l+"-")
			names = append(names, more...)
		}
		cancel()
		if err == nil {
			break
		}
		store := plan.RedactURLs(s.store.String())
		if errors.Is(err, errPermanent) {
			return fmt.Errorf("route %s: object_store %s: listing the prefix was refused; name_by = source_position needs it to recognise a replay: %w", s.route, store, err)
		}
		s.log.Warn("object_store: listing the prefix failed; nothing is written until it succeeds",
			"store", store, "attempt", attempt, "err", plan.RedactURLs(err.Error()))
		if attempt >= listAttempts {
			return runtime.Retryable(fmt.Errorf("route %s: object_store %s: list existing parts: %w", s.route, store, err))
		}
		time.Sleep(wait)
		wait *= 2
	}
	n := 0
	for _, name := range names {
		m := objectPartRE().FindStringSubmatch(name)
		if m != nil && m[1] != source && !slices.Contains(legacy, m[1]) {
			if other, ok := runtime.PartsOfAnotherRoute(s.src, m[1]); ok && s.epoch == "" {
				return fmt.Errorf("route %s: object_store %s: it holds parts of this same input written by route %s (%s): parts are named by their route, so this route would write every record again beside them. "+
					"If %s is route %s renamed, give it its old name back; if the parts are another route's on purpose, give this route a prefix of its own",
					s.route, plan.RedactURLs(s.store.String()), other, name, s.route, other)
			}
		}
		if m == nil || (m[1] != source && !slices.Contains(legacy, m[1])) {
			continue
		}
		part, err0 := strconv.ParseUint(m[2], 10, 31)
		span, err1 := runtime.ParsePartSpan(m[3])
		if err0 != nil || err1 != nil {
			continue
		}
		s.covered.Add(int32(part), span)
		s.before.Add(int32(part), span)
		n++
	}
	s.source, s.legacy, s.listed = source, legacy, true
	s.log.Info("object_store: listed existing parts", "store", plan.RedactURLs(s.store.String()), "parts", n)
	return nil
}

// partsPrefix is the prefix of the part names listed at the start: this
// source's, or, for a source that can tell its input's parts written by a
// route of another name (a renamed route would write them all again:
// runtime.PartsOfAnotherRoute), every part whose source name shares its
// base name (a file source's is base.route.key).
func (s *objectSink) partsPrefix(source string) string {
	if _, ok := s.src.(runtime.RenamedPartSource); ok && s.epoch == "" {
		if base, _, ok := strings.Cut(source, "."); ok {
			return "part-" + base + "."
		}
	}
	return "part-" + source + "-"
}

// flushPart writes p as one part object and marks its range covered.
func (s *objectSink) flushPart(ctx context.Context, p *piece) error {
	if p.recs == 0 {
		return nil
	}
	span := runtime.SpanOf(p.first, p.last)
	name := objectPartName(s.source, p.first.Partition, span, s.ext)
	if err := s.put(ctx, name, p.body); err != nil {
		return err
	}
	s.mu.Lock()
	s.covered.Add(p.first.Partition, span)
	s.mu.Unlock()
	*p = piece{}
	return nil
}

func (s *objectSink) writeByTime(ctx context.Context, recs []*runtime.Record) error {
	var p piece
	flush := func() error {
		if p.recs == 0 {
			return nil
		}
		id, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("route %s: object_store: mint object name: %w", s.route, err)
		}
		name := id.String() + s.ext
		if s.datePartition {
			name = s.now().UTC().Format("2006/01/02/") + name
		}
		if err := s.put(ctx, name, p.body); err != nil {
			return err
		}
		p = piece{}
		return nil
	}
	for _, r := range recs {
		line, err := appendLine(nil, r)
		if err != nil {
			r.Refuse(err.Error())
			continue
		}
		if p.recs > 0 && len(p.body)+len(line) > s.maxBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		p.body = append(p.body, line...)
		p.recs++
	}
	return flush()
}

// put compresses body and writes it once under name; an object already
// there under that name is a repeat of this write, and success.
func (s *objectSink) put(ctx context.Context, name string, body []byte) error {
	data, err := s.compress(body)
	if err != nil {
		return fmt.Errorf("route %s: object_store: compress %s: %w", s.route, name, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	created, err := s.store.PutIfAbsent(pctx, name, data, s.contentType)
	if err != nil {
		err = fmt.Errorf("route %s: object_store %s: put %s: %w", s.route, plan.RedactURLs(s.store.String()), name, err)
		if errors.Is(err, errPermanent) {
			return err
		}
		return runtime.Retryable(err)
	}
	if !created {
		s.log.Info("object_store: object already exists; a repeat of an earlier write", "object", name)
	}
	return nil
}

// appendLine appends r's payload as one line (the sink writes payloads,
// never the DLQ envelope).
func appendLine(buf []byte, r *runtime.Record) ([]byte, error) {
	if err := r.EncodePayload(); err != nil {
		return buf, err
	}
	buf = append(buf, r.Payload...)
	return append(buf, '\n'), nil
}

func (s *objectSink) compress(body []byte) ([]byte, error) {
	switch s.compression {
	case "gzip":
		var b bytes.Buffer
		b.Grow(len(body) / 4)
		w := gzip.NewWriter(&b)
		if _, err := w.Write(body); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	case "zstd":
		return s.zstd.EncodeAll(body, make([]byte, 0, len(body)/4)), nil
	}
	return body, nil
}

func (s *objectSink) Close() error {
	if s.zstd != nil {
		s.zstd.Close()
	}
	return s.store.Close()
}
