package objectstore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// objectSource reads every object under a prefix (object_store as a
// source), in key order, one record per line; an object named *.gz or *.zst
// is decompressed first. It lists the prefix once when it opens and ends at
// the end of that listing: objects added later are read by the next run,
// which resumes after the last record this run committed. With
// poll_interval set it follows the prefix instead: at the end of the
// listing it lists again every poll_interval and reads the objects that
// sort after the last one it knew, until the route is stopped.
//
// Its one partition numbers records across the listing (Seq 0 is the first
// record of the first object), so a re-read of an unchanged prefix numbers
// the same records the same way. Each record also carries the number of its
// object's lines read through it (Record.Next). The checkpoint keeps the
// position of the last committed record as (object key, lines read) —
// "done:<key>" once that object was read to its end — so a restart skips
// every object before it unread and, inside a half-read one, only passes
// over the lines already committed.
//
// This assumes a prefix that grows at the end of its key order, as the
// object_store sink writes it (UUIDv7 names under write_time, zero-padded
// positions under source_position): an object added later under a key that
// sorts before one already read would never be read, and it shifts the
// numbering of a from-scratch re-read. That is the plan's increasing_id
// premise on the source, and the source checks it (source_behind.go): it
// stops the route when a listing holds more objects at or before the last
// key it knew than it has listed there before. Objects must not change
// once written (a re-written object is read from the committed line on).
type objectSource struct {
	route     string
	log       *slog.Logger
	store     objectStore
	url       string // the store's location, secrets removed: identifies the checkpoint
	name      string
	format    string
	maxRecord int

	keys []string // the listing, in key order
	// stamps are the greatest stamp of the objects listed up to each of
	// keys (source_stamps.go; nil: the store gives none), from
	// beforeStamp, the greatest of those listed before keys[0].
	stamps      []int64
	beforeStamp int64
	before      int64  // objects listed before keys[0] (read, or gone since)
	nextKey     int    // index in keys of the next object to open
	lastKey     string // the greatest key listed (or checkpointed): a new listing reads only what sorts after it
	poll        time.Duration

	// The object being read.
	cur     string
	body    io.ReadCloser
	dec     io.Closer // the decompressor over body, if any
	r       *bufio.Reader
	line    int64 // lines of cur read so far (blank ones included)
	skip    int64 // lines of cur to pass over unread (a resume inside it)
	nextSeq uint64
	scratch []byte
	// arenaHint sizes the next batch's payload arena from the last one.
	arenaHint int

	opened, total atomic.Int64 // objects opened and listed, for progress

	failures int // consecutive failed store requests, for retries

	premise string // the armed increasing_id premise's reason, for errors

	// spans maps Seq ranges to objects for position, which runs on the
	// committer goroutine while the reader appends.
	mu    sync.Mutex
	spans []objectSpan
}

// objectSpan is the run of Seqs read from one object; once the object was
// read to its end, complete is set and end is the Seq after its last record.
type objectSpan struct {
	key      string
	upTo     int64 // objects listed at or before key (source_behind.go)
	stamp    int64 // the newest stamp listed at or before key (source_stamps.go; -1: none)
	first    uint64
	end      uint64
	complete bool
}

// objectReader is a store that can stream an object instead of reading it
// whole into memory.
type objectReader interface {
	open(ctx context.Context, name string) (io.ReadCloser, error)
}

func (s *dirStore) open(_ context.Context, name string) (io.ReadCloser, error) {
	return os.Open(s.path(name))
}

// A failed listing, object open or read is retried this many times, the
// wait doubling from objectRetryBackoff up to objectRetryMaxBackoff (about
// 30 s in all), unless the store says it is permanent (a missing bucket, a
// denied read). A read that fails halfway reopens the object and passes
// over the lines already read.
const (
	objectRetryAttempts   = 10
	objectRetryBackoff    = 100 * time.Millisecond
	objectRetryMaxBackoff = 5 * time.Second
)

const (
	objectCheckpointAt   = "object:" // the last committed record is inside this object
	objectCheckpointDone = "done:"   // this object and every one before it are committed
	// Either prefix with "#<n>" before its colon also keeps how many
	// objects were listed at or before the key (source_behind.go).
)

// objectSourceConfig is an object_store source's attributes (stdlib
// declares them; the sink's are objectSinkConfig).
type objectSourceConfig struct {
	// URL may call env(): RenderStatic renders it from the node, naming
	// the attribute in its errors.
	URL             []plan.Part   `attr:"url"`
	Format          string        `attr:"format"`
	MaxRecordBytes  int64         `attr:"max_record_bytes"`
	PollInterval    time.Duration `attr:"poll_interval"`    // 0: end at the end of the listing
	CheckpointStore string        `attr:"checkpoint_store"` // the engine opens it
	Endpoint        string        `attr:"endpoint"`
	Region          string        `attr:"region"`
	PathStyle       bool          `attr:"path_style"`
}

func init() {
	runtime.RegisterSource("object_store", buildObjectSource)
}

func buildObjectSource(b *runtime.BuildEnv, cfg *objectSourceConfig) (runtime.Source, error) {
	rawURL, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	s := &objectSource{
		route:     b.Route(),
		log:       b.Logger(),
		format:    cfg.Format,
		maxRecord: int(cfg.MaxRecordBytes),
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return nil, b.Errorf("format", "format %q is not supported by the object_store source (json, text or raw)", s.format)
	}
	if s.maxRecord <= 0 {
		return nil, b.Errorf("max_record_bytes", "must be positive, got %d", s.maxRecord)
	}
	if s.poll = cfg.PollInterval; s.poll < 0 {
		return nil, b.Errorf("poll_interval", "must not be negative, got %v", s.poll)
	}
	// A source does not create its directory: a missing one is a mistake.
	if dir, ok := strings.CutPrefix(rawURL, "file://"); ok {
		if !filepath.IsAbs(dir) && b.BaseDir() != "" {
			dir = filepath.Join(b.BaseDir(), dir)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			if err == nil {
				err = fmt.Errorf("%s is not a directory", dir)
			}
			return nil, b.Errorf("url", "%v", err)
		}
	}
	s3o, err := s3OptionsFor(b, rawURL, s3Options{Endpoint: cfg.Endpoint, Region: cfg.Region, PathStyle: cfg.PathStyle})
	if err != nil {
		return nil, err
	}
	st, err := openObjectStore(context.Background(), rawURL, b.BaseDir(), s3o)
	if err != nil {
		return nil, b.Errorf("url", "%v", err)
	}
	if objectStoreHook != nil {
		st = objectStoreHook(st)
	}
	s.store = st
	s.url = st.String()
	s.name = objectSourceName(s.url)
	return s, nil
}

// objectSourceName is the prefix's last element, safe in a part name.
func objectSourceName(url string) string {
	u := strings.TrimRight(url, "/")
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
	}
	base := runtime.SafeName(path.Base(u))
	base = strings.ReplaceAll(base, "-", "_")
	if base == "" || base == "." || base == "_" {
		return "objects"
	}
	return base
}

func (s *objectSource) Name() string     { return s.name }
func (s *objectSource) Replayable() bool { return true }

// Finite: without poll_interval the listing is read once, to its end.
func (s *objectSource) Finite() bool         { return s.poll == 0 }
func (s *objectSource) RecordFormat() string { return s.format }
func (s *objectSource) SeqGaps() bool        { return false }

// Progress is in objects: those opened of the listing.
func (s *objectSource) Progress() (read, size int64, ok bool) {
	size = s.total.Load()
	return s.opened.Load(), size, size > 0
}

func (s *objectSource) checkpointSource() string { return "object_store:" + s.url }

// Open lists the prefix and, from a checkpoint of the same store, skips
// the objects before the committed one and the committed lines inside it.
func (s *objectSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, _ runtime.SourceHost) error {
	var keys []string
	var stamps []int64
	for {
		var err error
		if keys, stamps, err = s.listing(ctx); err == nil {
			break
		}
		err = fmt.Errorf("route %s: object_store source %s: list: %w", s.route, s.url, err)
		if !s.retryWait(ctx, err) {
			if ctx.Err() != nil {
				return nil // cancelled while waiting: the route ends
			}
			return err
		}
	}
	s.failures = 0
	s.keys, s.beforeStamp = keys, -1
	s.stamps = prefixMax(stamps, -1)
	if len(keys) > 0 {
		s.lastKey = keys[len(keys)-1]
	}
	s.total.Store(int64(len(keys)))
	defer func() { s.opened.Store(int64(s.nextKey)) }()
	if !haveCP || cp.Source != s.checkpointSource() {
		return nil
	}
	key, done, upTo, stamp, ok := parseObjectMode(cp.Mode)
	if !ok {
		return nil
	}
	if err := s.checkResumeBehind(key, upTo); err != nil {
		return err
	}
	if err := s.checkWritten(keys, stamps, key, stamp, "the route committed"); err != nil {
		return err
	}
	s.nextSeq = cp.NextIndex
	// The first object not before the checkpoint's.
	i := 0
	for i < len(keys) && keys[i] < key {
		i++
	}
	if i < len(keys) && keys[i] == key {
		if done {
			i++
		} else {
			s.skip = cp.Offset
		}
	} else if !done {
		s.log.Warn("object_store source: the checkpoint's object is gone; resuming at the next one", "object", key)
	}
	s.nextKey = i
	s.lastKey = max(s.lastKey, key)
	s.log.Info("resuming from checkpoint", "object", key, "object_done", done, "lines", cp.Offset, "next_index", cp.NextIndex)
	return nil
}

func (s *objectSource) ResumeAt() map[int32]runtime.AckPos {
	return map[int32]runtime.AckPos{0: {Next: s.nextSeq, Offset: s.skip}}
}

// Position names the object holding the last committed record (found by
// its Seq) and how many of that object's lines are committed.
func (s *objectSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	c, ok := committed[0]
	if !ok || c.Next == 0 {
		return checkpoint.Position{Source: s.checkpointSource()}, true
	}
	last := c.Next - 1
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for i+1 < len(s.spans) && s.spans[i+1].first <= last {
		i++
	}
	if len(s.spans) == 0 || s.spans[i].first > last {
		// Nothing read by this run is committed yet; position is only
		// asked for once something is, so this is not expected.
		return checkpoint.Position{}, false
	}
	sp := s.spans[i]
	s.spans = s.spans[i:] // spans before the committed one are never asked for again
	pos := checkpoint.Position{Source: s.checkpointSource(), NextIndex: c.Next, Offset: c.Offset,
		Mode: objectMode(sp.key, sp.complete && c.Next == sp.end, sp.upTo, sp.stamp)}
	return pos, true
}

func (s *objectSource) Commit(context.Context, map[int32]runtime.AckPos) error { return nil }

func (s *objectSource) Close() error {
	err := s.closeObject()
	if s.store != nil {
		err = errors.Join(err, s.store.Close())
	}
	return err
}

func (s *objectSource) closeObject() error {
	var err error
	if s.dec != nil {
		err = s.dec.Close()
		s.dec = nil
	}
	if s.body != nil {
		err = errors.Join(err, s.body.Close())
		s.body = nil
	}
	s.r = nil
	return err
}

// relist waits poll_interval and lists the prefix again, keeping the
// objects that sort after every key seen so far.
func (s *objectSource) relist(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(s.poll):
	}
	keys, stamps, err := s.listing(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		err = fmt.Errorf("route %s: object_store source %s: list: %w", s.route, s.url, err)
		if s.retryWait(ctx, err) || ctx.Err() != nil {
			return nil // the next call lists again
		}
		return err
	}
	s.failures = 0
	upTo := int64(countUpTo(keys, s.lastKey))
	if err := s.checkBehind(upTo); err != nil {
		return err
	}
	known := s.beforeStamp
	if n := len(s.stamps); n > 0 {
		known = s.stamps[n-1]
	}
	if err := s.checkWritten(keys, stamps, s.lastKey, known, "the source listed"); err != nil {
		return err
	}
	// Drop what was read: a long follow keeps only the listing ahead.
	keys, stamps, newest := withoutKnown(keys, stamps, s.lastKey)
	s.keys, s.nextKey, s.before = keys, 0, upTo
	s.beforeStamp = max(known, newest)
	s.stamps = prefixMax(stamps, s.beforeStamp)
	if n := len(s.keys); n > 0 {
		s.lastKey = s.keys[n-1]
		s.total.Add(int64(n))
	}
	return nil
}

// retryWait decides whether a failed store request is tried again and, if
// so, waits before it. false: give up (permanent, out of attempts, or ctx
// done).
func (s *objectSource) retryWait(ctx context.Context, err error) bool {
	if errors.Is(err, errPermanent) || ctx.Err() != nil {
		return false
	}
	s.failures++
	if s.failures >= objectRetryAttempts {
		return false
	}
	wait := objectRetryBackoff << (s.failures - 1)
	if wait > objectRetryMaxBackoff || wait <= 0 {
		wait = objectRetryMaxBackoff
	}
	s.log.Warn("object_store source: store request failed, retrying", "attempt", s.failures, "wait", wait, "err", err)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}

// reopen opens the current object again after a read failed halfway: the
// lines read so far are passed over.
func (s *objectSource) reopen(ctx context.Context) error {
	key, read := s.cur, s.line
	s.closeObject()
	body, err := s.openBody(ctx, key)
	if err != nil {
		return err
	}
	if err := s.startObject(key, body); err != nil {
		return err
	}
	s.skip = max(s.skip, read)
	return nil
}

// openBody starts reading an object's bytes.
func (s *objectSource) openBody(ctx context.Context, key string) (io.ReadCloser, error) {
	// The object is read through ctx's cancellation: next stops between
	// lines when ctx is done, and a drain must not see a read fail halfway.
	ctx = context.WithoutCancel(ctx)
	if or, ok := s.store.(objectReader); ok {
		body, err := or.open(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("route %s: object_store source %s: read %s: %w", s.route, s.url, key, err)
		}
		return body, nil
	}
	data, err := s.store.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("route %s: object_store source %s: read %s: %w", s.route, s.url, key, err)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// startObject puts the reader on body, decompressing by key's extension.
func (s *objectSource) startObject(key string, body io.ReadCloser) error {
	s.cur, s.body, s.line = key, body, 0
	var rd io.Reader = body
	switch {
	case strings.HasSuffix(key, ".gz"):
		zr, err := gzip.NewReader(body)
		if err != nil {
			s.closeObject()
			return fmt.Errorf("route %s: object_store source %s: %s: gzip: %w", s.route, s.url, key, err)
		}
		rd, s.dec = zr, zr
	case strings.HasSuffix(key, ".zst"):
		zr, err := zstd.NewReader(body, zstd.WithDecoderConcurrency(1))
		if err != nil {
			s.closeObject()
			return fmt.Errorf("route %s: object_store source %s: %s: zstd: %w", s.route, s.url, key, err)
		}
		rd, s.dec = zr, zstdCloser{zr}
	}
	s.r = bufio.NewReaderSize(rd, 1<<20)
	return nil
}

// openNext opens the next object of the listing; ok false at its end.
func (s *objectSource) openNext(ctx context.Context) (ok bool, err error) {
	if s.nextKey >= len(s.keys) {
		return false, nil
	}
	key := s.keys[s.nextKey]
	body, err := s.openBody(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		// Deleted since the listing: there is nothing of it to read.
		s.log.Warn("object_store source: object listed but gone; skipping it", "object", key)
		s.nextKey++
		s.opened.Add(1)
		return s.openNext(ctx)
	}
	if err != nil {
		return false, err
	}
	s.nextKey++
	s.opened.Add(1)
	if err := s.startObject(key, body); err != nil {
		return false, err
	}
	s.mu.Lock()
	stamp := int64(-1)
	if s.stamps != nil {
		stamp = s.stamps[s.nextKey-1]
	}
	s.spans = append(s.spans, objectSpan{key: key, upTo: s.before + int64(s.nextKey), stamp: stamp, first: s.nextSeq})
	s.mu.Unlock()
	return true, nil
}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

// finishObject marks the current object read to its end.
func (s *objectSource) finishObject() error {
	s.mu.Lock()
	if n := len(s.spans); n > 0 && s.spans[n-1].key == s.cur {
		s.spans[n-1].end, s.spans[n-1].complete = s.nextSeq, true
	}
	s.mu.Unlock()
	if s.skip > s.line {
		s.log.Warn("object_store source: the checkpoint's object has fewer lines than were committed; was it replaced?",
			"object", s.cur, "lines", s.line, "committed_lines", s.skip)
	}
	s.skip = 0
	return s.closeObject()
}

// Next reads up to max records, moving through objects as they end; eof
// once the listing is exhausted.
func (s *objectSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatchArena(max, s.arenaHint)
	defer func() { s.arenaHint = min(b.PayloadBytes()+b.PayloadBytes()/8, runtime.MaxBatchBytes) }()
	var payloadBytes int
	for b.Len() < max && payloadBytes < runtime.MaxBatchBytes {
		if ctx.Err() != nil {
			return b, false, nil
		}
		if s.r == nil {
			ok, err := s.openNext(ctx)
			if err != nil {
				if s.retryWait(ctx, err) {
					continue
				}
				if ctx.Err() != nil {
					return b, false, nil
				}
				return b, false, err
			}
			if !ok {
				if s.poll == 0 {
					return b, true, nil
				}
				if b.Len() > 0 {
					return b, false, nil // hand over what we have; list again next time
				}
				if err := s.relist(ctx); err != nil {
					return b, false, err
				}
				continue
			}
		}
		line, tooLong, err := s.readLine()
		if err == io.EOF {
			if line != nil {
				payloadBytes += len(line)
				s.add(b, line, tooLong)
			}
			if err := s.finishObject(); err != nil {
				return b, false, fmt.Errorf("route %s: object_store source %s: %s: %w", s.route, s.url, s.cur, err)
			}
			continue
		}
		if err != nil {
			err = fmt.Errorf("route %s: object_store source %s: read %s at line %d: %w", s.route, s.url, s.cur, s.line+1, err)
			for s.retryWait(ctx, err) {
				if err = s.reopen(ctx); err == nil {
					break
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return b, false, nil
				}
				return b, false, err
			}
			continue
		}
		s.failures = 0
		payloadBytes += len(line)
		s.add(b, line, tooLong)
	}
	return b, false, nil
}

// add appends a record for the line just read, unless it is being skipped
// (already committed) or blank (no index, as in the file source).
func (s *objectSource) add(b *runtime.Batch, line []byte, tooLong int) {
	if s.line == 0 {
		line = runtime.TrimByteOrderMark(line, s.format)
	}
	s.line++
	if s.line <= s.skip {
		return
	}
	if tooLong == 0 && len(bytes.TrimSpace(line)) == 0 {
		return
	}
	rec := runtime.Record{Seq: s.nextSeq, Next: s.line}
	if tooLong > 0 {
		rec.DeadLetter(fmt.Sprintf("record of %d bytes exceeds max_record_bytes = %d (payload truncated to %d bytes) in object %s", tooLong, s.maxRecord, len(line), s.cur))
	}
	s.nextSeq++
	b.AddCopy(rec, line)
}

// readLine returns the next line without its ending. A line longer than
// max_record_bytes is read through without keeping more than a snippet:
// tooLong is then its length. At the end of the object it returns the
// last unterminated line (nil if none) with io.EOF.
func (s *objectSource) readLine() (line []byte, tooLong int, err error) {
	s.scratch = s.scratch[:0]
	total := 0
	over := false
	for {
		chunk, err := s.r.ReadSlice('\n')
		total += len(chunk)
		if !over {
			if len(s.scratch)+len(chunk) > s.maxRecord+2 { // +2: the line ending is not part of the record
				over = true
				keep := min(runtime.DLQSnippetBytes, len(s.scratch)+len(chunk))
				s.scratch = append(s.scratch, chunk[:max(0, keep-len(s.scratch))]...)
			} else {
				s.scratch = append(s.scratch, chunk...)
			}
		}
		switch {
		case err == nil || err == io.EOF:
			if err == io.EOF && total == 0 {
				return nil, 0, io.EOF
			}
			content := bytes.TrimRight(s.scratch, "\r\n")
			if over || len(content) > s.maxRecord {
				return truncate(content), max(total-1, len(content)), err
			}
			return content, 0, err
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, 0, err
		}
	}
}

// truncate is the start of an over-long line the DLQ keeps.
func truncate(b []byte) []byte {
	if len(b) > runtime.DLQSnippetBytes {
		return b[:runtime.DLQSnippetBytes]
	}
	return b
}
