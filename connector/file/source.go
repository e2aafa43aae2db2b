package file

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
	"github.com/mqb-dev/mqb/stdlib"
)

// The provenance keys a file source sets under source_metadata.
const (
	metaFile = runtime.MetaSourcePrefix + "file"
	metaLine = runtime.MetaSourcePrefix + "line"
)

// File source modes.
const (
	modeConsume        = "consume"
	modeSubscribe      = "subscribe"
	modeGroupSubscribe = "group_subscribe"
)

// fileSource reads one record per line.
type fileSource struct {
	route     string
	pipeline  string // the .mqb file that declares the route, for the reset command
	log       *slog.Logger
	path      string
	mode      string
	format    string
	maxRecord int
	poll      time.Duration

	f       *os.File
	r       *bufio.Reader
	offset  int64  // byte offset of the next unread byte
	nextSeq uint64 // index of the next record
	partial []byte // follow modes: an unterminated last line, kept until its newline arrives
	// partialLen is the length of that line so far; more than len(partial)
	// when it is already too long and only a snippet is kept.
	partialLen int
	scratch    []byte // a line longer than the read buffer
	heldCheck  []byte // the file's bytes where partial was, read again (stillHeld)
	head       []byte // the file's first bytes, read again by checkUnchanged
	// arenaHint sizes the next batch's payload arena from the last one, so
	// it is allocated once instead of grown (and copied) by doubling.
	arenaHint int

	size      atomic.Int64 // file size at open (consume), for progress
	bytesRead atomic.Int64

	// state says where the route's checkpoint is, for messages.
	state string
	// id is the file being read; label its name in part names, and
	// legacyLabels the names part files of the same input carried before
	// part names had identities (recognised only when resuming a
	// checkpoint written then).
	id           fileIdentity
	label        string
	legacyLabels []string
	// segs are the files read this run, in order, with the record index
	// each starts at: in a follow mode a rotation starts a new one, and a
	// checkpoint names the file its committed position is in.
	segMu sync.Mutex
	segs  []fileSeg
	// rotated: the path now names another file (or a truncated one);
	// once the open file is read to its end it is finished and the
	// source moves to the path's new file. rotatedAt bounds how long an
	// unterminated last line of the old file is waited for.
	rotated   bool
	rotatedAt time.Time
	truncated bool

	// meta: source_metadata is on, and each record carries metaPath (the
	// file as the path attribute names it) and its index in the file,
	// counted from fileFirst, the Seq of the file's first record.
	meta      bool
	metaPath  string
	fileFirst uint64
	// fromStart: a subscribe-mode reader of one file of a glob that
	// appeared while the route ran, read from its start (glob.go).
	fromStart bool
	// blocks: the route takes blocks of lines (runtime.BlockSource),
	// read straight into them from file; s.r then reads through file too,
	// which hands out first the bytes a block read and did not take.
	blocks bool
	file   pendingReader
}

// pendingReader reads f, after the bytes in pending: what a block read
// straight from the file and did not take (the start of a line, or lines
// that go as records), for the read buffer to read next.
type pendingReader struct {
	pending []byte
	f       *os.File
}

func (p *pendingReader) Read(b []byte) (int, error) {
	if len(p.pending) > 0 {
		n := copy(b, p.pending)
		p.pending = p.pending[:copy(p.pending, p.pending[n:])]
		return n, nil
	}
	return p.f.Read(b)
}

// fileSeg is one file a source read.
type fileSeg struct {
	first uint64 // Seq of its first record
	start int64  // byte offset reading started at
	id    fileIdentity
}

// readBufferBytes is the size of a file source's read buffer: large
// enough that reads cost little next to the lines' handling (a read
// every few thousand lines), small enough not to show in the route's
// memory. A longer line is gathered from several reads.
const readBufferBytes = 256 << 10

// rotateGrace is how long a rotated-away file must stay unchanged (its
// writer may still hold it open) before it is taken as finished, its
// unterminated last line, if any, as its last record.
const rotateGrace = 2 * time.Second

// Name is the name the file's part files carry: its base name, the
// route and a short key of the file's identity (see partsKey). Before open
// it is worked out from the file as it is now.
func (s *fileSource) Name() string {
	if s.label != "" {
		return s.label
	}
	if f, err := os.Open(s.path); err == nil {
		id, _, err := identify(f)
		f.Close()
		if err == nil {
			return s.labelFor(partsKey(s.route, id))
		}
	}
	return s.baseName()
}

func (s *fileSource) labelFor(key string) string {
	return s.baseName() + "." + partSafe(s.route) + "." + key
}

// PartsOfRoute reports whether parts whose source name is name hold this
// file, as it is now, written by a route of another name: the label is
// the file's base name, the route's and a key of the route and the file's
// identity (labelFor), so the key tells.
func (s *fileSource) PartsOfRoute(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, s.baseName()+".")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || rest[:i] == partSafe(s.route) {
		return "", false
	}
	id := s.id
	if s.label == "" {
		f, err := os.Open(s.path)
		if err != nil {
			return "", false
		}
		id, _, err = identify(f)
		f.Close()
		if err != nil {
			return "", false
		}
	}
	// A route's name is an identifier: partSafe leaves it as it is.
	if route := rest[:i]; partsKey(route, id) == rest[i+1:] {
		return route, true
	}
	return "", false
}

// LegacyPartSources are the source names of part files written before part
// names carried the file's identity: they cover this file's positions only
// when the route resumes a checkpoint written then.
func (s *fileSource) LegacyPartSources() []string { return s.legacyLabels }

func partSafe(name string) string {
	name = runtime.SafeName(name)
	return strings.ReplaceAll(name, "-", "_") // '-' separates the numbers in a part name
}

// baseName is the file's base name without extension, safe in a part name.
func (s *fileSource) baseName() string {
	base := filepath.Base(s.path)
	if ext := filepath.Ext(base); ext != "" && ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	base = partSafe(base)
	if base == "" {
		base = "file"
	}
	return base
}

// replayable reports whether positions repeat across runs (consume mode).
// fileSourceConfig is a file source's attributes (stdlib declares them).
type fileSourceConfig struct {
	Path            string `attr:"path"`
	Mode            string `attr:"mode"`
	Format          string `attr:"format"`
	MaxRecordBytes  int64  `attr:"max_record_bytes"`
	CheckpointStore string `attr:"checkpoint_store"` // openCheckpointStore
	SourceMetadata  bool   `attr:"source_metadata"`
}

func init() {
	runtime.RegisterSource("file", func(b *runtime.BuildEnv, cfg *fileSourceConfig) (runtime.Source, error) {
		path := cfg.Path
		if !filepath.IsAbs(path) && b.BaseDir() != "" {
			path = filepath.Join(b.BaseDir(), path)
		}
		s := &fileSource{
			route:     b.Route(),
			pipeline:  b.Pos().File,
			log:       b.Logger(),
			path:      path,
			mode:      cfg.Mode,
			format:    cfg.Format,
			maxRecord: int(cfg.MaxRecordBytes),
			poll:      100 * time.Millisecond,
			meta:      cfg.SourceMetadata,
			metaPath:  cfg.Path,
		}
		switch s.format {
		case "json", "text", "raw":
		default:
			return nil, b.Errorf("format", "format %q is not supported by the file source yet", s.format)
		}
		if s.maxRecord <= 0 {
			return nil, b.Errorf("max_record_bytes", "must be positive, got %d", s.maxRecord)
		}
		if stdlib.FilePathNamesMany(cfg.Path) {
			return newGlobSource(b, s, cfg.Path)
		}
		return s, nil
	}, runtime.DescribesCheckpoint(describeFileCheckpoint))
}

// describeFileCheckpoint says which byte of which file a file source's
// committed position is, for `mqbc state`.
func describeFileCheckpoint(pos checkpoint.Position) runtime.CheckpointDetail {
	if pattern, gp, ok := decodeGlobSource(pos.Source); ok {
		file, identity := CheckpointSource(gp.file)
		detail := fmt.Sprintf("byte %d of %s (of %s)", pos.Offset, file, pattern)
		if gp.done {
			detail = fmt.Sprintf("%s and every file of %s before it read", file, pattern)
		}
		return runtime.CheckpointDetail{Detail: detail, File: file, Identity: identity}
	}
	file, identity := CheckpointSource(pos.Source)
	return runtime.CheckpointDetail{Detail: fmt.Sprintf("byte %d of %s", pos.Offset, file), File: file, Identity: identity}
}

func (s *fileSource) Replayable() bool { return s.mode == modeConsume }

// Finite: a consumed file ends at its end; a subscribed one is followed.
func (s *fileSource) Finite() bool { return s.mode == modeConsume }

func (s *fileSource) RecordFormat() string { return s.format }

func (s *fileSource) SeqGaps() bool { return false }

func (s *fileSource) Progress() (read, size int64, ok bool) {
	size = s.size.Load()
	return s.bytesRead.Load(), size, size > 0 && s.mode == modeConsume
}

// Position is the file's one partition: the next record index, the byte
// offset it starts at, and which file that offset is in (the path and the
// file's identity, see encodeFileSource). After a rotation the committed
// position may still be in the old file.
func (s *fileSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	c := committed[0]
	s.segMu.Lock()
	defer s.segMu.Unlock()
	if len(s.segs) == 0 {
		return checkpoint.Position{Source: s.path, Mode: s.mode, NextIndex: c.Next, Offset: c.Offset}, true
	}
	i := 0
	for j := range s.segs {
		if s.segs[j].first <= c.Next {
			i = j
		}
	}
	seg, off := s.segs[i], c.Offset
	if i > 0 && c.Next == seg.first {
		off = seg.start // nothing of this file committed yet: every earlier file is
	}
	s.segs = s.segs[i:] // files before the committed one are done with
	return checkpoint.Position{Source: encodeFileSource(s.path, seg.id), Mode: s.mode, NextIndex: c.Next, Offset: off}, true
}

// Commit has nothing to do: the checkpoint store holds the position.
func (s *fileSource) Commit(context.Context, map[int32]runtime.AckPos) error { return nil }

// Open positions the source: consume resumes after the committed record
// index, group_subscribe at the committed byte offset, subscribe at the end.
// Its one partition, 0, starts being tracked at the resumed record index.
func (s *fileSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, host runtime.SourceHost) error {
	s.state = runtime.CheckpointLocation(host)
	if err := s.openFile(ctx, cp, haveCP); err != nil || s.f == nil {
		return err
	}
	if haveCP && s.offset > 0 {
		s.log.Info("resuming from checkpoint", "next_index", s.nextSeq, "offset", s.offset)
	}
	return nil
}

func (s *fileSource) ResumeAt() map[int32]runtime.AckPos {
	return map[int32]runtime.AckPos{0: {Next: s.nextSeq, Offset: s.offset}}
}

func (s *fileSource) openFile(ctx context.Context, cp checkpoint.Position, haveCP bool) error {
	if err := s.waitOpen(ctx); err != nil || s.f == nil {
		return err
	}
	return s.start(cp, haveCP)
}

// waitOpen opens the path; a follow mode waits for it to appear (s.f
// stays nil when ctx ends first).
func (s *fileSource) waitOpen(ctx context.Context) error {
	for {
		if err := refuseSpecial(s.path); err != nil {
			return fmt.Errorf("route %s: file source: %w", s.route, err)
		}
		f, err := os.Open(s.path)
		if err == nil {
			s.f = f
			break
		}
		if s.mode == modeConsume || !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("route %s: file source: %w", s.route, err)
		}
		select { // follow modes wait for the file to appear
		case <-ctx.Done():
			return nil
		case <-time.After(s.poll):
		}
	}
	return nil
}

// start positions the open file s.f: at cp when it is a position in this
// file (consume, group_subscribe), at its end (subscribe, unless
// fromStart), else at its start.
func (s *fileSource) start(cp checkpoint.Position, haveCP bool) error {
	if st, err := s.f.Stat(); err == nil && st.IsDir() {
		return fmt.Errorf("route %s: file source %s is a directory: write the path with a trailing slash (%q) to read every file in it", s.route, s.path, s.metaPath+"/")
	}
	cur, size, err := identify(s.f)
	if err != nil {
		return fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
	}
	s.size.Store(size)
	s.id = cur
	s.id.Parts = partsKey(s.route, cur)
	switch s.mode {
	case modeConsume, modeGroupSubscribe:
		if haveCP && cp.Mode == s.mode {
			if err := s.resume(cp, cur, size); err != nil {
				return err
			}
		}
	case modeSubscribe:
		if !s.fromStart {
			s.offset = size
		}
	default:
		return fmt.Errorf("route %s: file source attribute mode: unknown mode %q", s.route, s.mode)
	}
	s.label = s.labelFor(s.id.Parts)
	s.segs = []fileSeg{{first: s.nextSeq, start: s.offset, id: s.id}}
	if _, err := s.f.Seek(s.offset, io.SeekStart); err != nil {
		return fmt.Errorf("route %s: file source: seek: %w", s.route, err)
	}
	s.bytesRead.Store(s.offset)
	if s.blocks {
		s.file = pendingReader{f: s.f}
		s.r = bufio.NewReaderSize(&s.file, readBufferBytes)
	} else {
		s.r = bufio.NewReaderSize(s.f, readBufferBytes)
	}
	return nil
}

// resume positions the source at the checkpoint cp after making sure it is
// a position in this file: the same inode, the same first bytes, at least
// as long as the offset, and the offset at a record boundary. Anything else
// is refused (a follow mode first looks for the file under a rotated name):
// an offset into other content would skip records quietly.
func (s *fileSource) resume(cp checkpoint.Position, cur fileIdentity, size int64) error {
	path, id, hasID := decodeFileSource(cp.Source)
	if path != s.path {
		return nil // the route was pointed at another input: it starts over
	}
	if !hasID {
		// Written before checkpoints named their file: taken once as it
		// stands (if the file is long enough), and from the next commit
		// on the checkpoint records this file's identity. Part files of
		// that time, named without an identity, still cover its records.
		if cp.Offset > size {
			return s.refuse(cp, fmt.Sprintf("the checkpoint offset %d is past the end of the file (%d bytes)", cp.Offset, size))
		}
		s.log.Info("the checkpoint has no file identity (written by an older mqb): resuming from it once; from now on it records which file it is for",
			"path", s.path, "offset", cp.Offset)
		s.legacyLabels = []string{s.baseName()}
		return s.at(cp, size)
	}
	if cp.Offset == 0 && cp.NextIndex == 0 {
		return nil // nothing was read: nothing to skip in whichever file this is
	}
	same, why, err := id.sameFile(s.f, cur)
	if err != nil {
		return fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
	}
	if same && cp.Offset > size {
		same, why = false, fmt.Sprintf("it is shorter (%d bytes) than the checkpoint offset %d: truncated or rewritten", size, cp.Offset)
	}
	if !same && s.mode == modeGroupSubscribe {
		// The file at the path was rotated away while the route was
		// down: finish it under its new name, then start the new one.
		if p, f := findRotated(filepath.Dir(s.path), id); f != nil {
			if st, err := f.Stat(); err == nil && st.Size() >= cp.Offset {
				s.log.Info("the checkpoint's file was rotated: finishing it, then reading the new file from its start",
					"rotated_to", p, "offset", cp.Offset)
				s.f.Close()
				s.f, cur, size = f, id, st.Size()
				s.rotated, s.rotatedAt = true, time.Now()
				same = true
			} else {
				f.Close()
			}
		}
	}
	if !same {
		return s.refuse(cp, "the file at the path is not the one the checkpoint was taken in: "+why)
	}
	// The same file: keep the identity its parts are named by, with the
	// fingerprint over as much of the start as there is now.
	s.id = cur
	s.id.Parts = id.Parts
	if cur.HeadLen < id.HeadLen {
		s.id.HeadLen, s.id.Head = id.HeadLen, id.Head
	}
	return s.at(cp, size)
}

// at takes cp's position once it is known to be in this file, refusing an
// offset that is not at a record boundary: consume reads a finished file's
// unterminated last line as a record, so a file that has since grown past
// it had been read while still being written.
func (s *fileSource) at(cp checkpoint.Position, size int64) error {
	if cp.Offset > 0 && cp.Offset < size {
		// The byte before the offset ends the last line read, or the
		// next one does (the line was whole: its newline came later).
		var b [2]byte
		if _, err := s.f.ReadAt(b[:], cp.Offset-1); err != nil {
			return fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
		}
		if b[0] != '\n' && b[1] != '\n' && b[1] != '\r' {
			return s.refuse(cp, fmt.Sprintf("the last line read (ending at byte %d) had no newline, and the file has grown since: that line was read before it was whole", cp.Offset))
		}
	}
	s.offset, s.nextSeq = cp.Offset, cp.NextIndex
	return nil
}

// refuse is the error for a checkpoint that is not a position in the file
// at the path.
func (s *fileSource) refuse(cp checkpoint.Position, why string) error {
	orRemove := "or remove " + s.state + ", which holds the state of every route kept there"
	if !filepath.IsAbs(s.state) {
		orRemove = "or delete the route's position in " + s.state
	}
	return fmt.Errorf("route %s: file source %s: the route's checkpoint (record %d, byte %d; state in %s) does not fit the file: %s. "+
		"mqb does not resume at a byte offset into other content. To read the file from its start, reset the route's state: "+
		"`mqbc state reset %s %s` (%s)",
		s.route, s.path, cp.NextIndex, cp.Offset, s.state, why, cmp.Or(s.pipeline, "FILE.mqb"), s.route, orRemove)
}

func (s *fileSource) Close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}

// blockBytes is the size of a block of lines a consume-mode source hands
// a route that takes blocks: a read buffer, so a write and an ack cover
// thousands of lines, small enough that a freed block's arena is reused
// (runtime's freeArenaMax) and the batches in flight stay small. A file
// → file route holds about eight blocks, every byte of them read into:
// at 512 KiB they were 4 MiB of the process's memory, and its peak RSS
// over the 40 MiB of issue #16; halved, they cost no CPU that shows
// (TestBlocksStaySmall).
const blockBytes = 256 << 10

// minBlockRead is the least room a block must have left to read the file
// into it once more: a block is ended rather than filled by tiny reads.
const minBlockRead = 16 << 10

// PassBlocks: a consume-mode source hands the route the lines that go as
// read in blocks (runtime.BlockSource), one batch holding as many as fill
// blockBytes with no record each. The route calls it before Open, which
// sets the read buffer to read through s.file.
func (s *fileSource) PassBlocks() { s.blocks = s.mode == modeConsume && !s.meta }

// Next reads the next batch. eof is true when a consume-mode source has
// reached the end of the file; follow modes never end (they return an empty
// batch when ctx is done).
func (s *fileSource) Next(ctx context.Context, size int) (b *runtime.Batch, eof bool, err error) {
	defer func() { s.bytesRead.Store(s.offset) }() // progress, once per batch
	if s.blocks {
		b = runtime.NewBatchArena(0, blockBytes)
		if s.addBlock(b) > 0 {
			if err := s.checkUnchanged(); err != nil {
				return nil, false, err
			}
			return b, false, nil
		}
		// The next line does not go as read (or the file is at its end):
		// a batch of records, as without blocks.
	} else {
		b = runtime.NewBatchArena(size, s.arenaHint)
	}
	var payloadBytes int
	for b.Len() < size && payloadBytes < runtime.MaxBatchBytes {
		if n := s.addLines(b, size, runtime.MaxBatchBytes-payloadBytes); n > 0 {
			payloadBytes += n
			if s.mode != modeConsume && s.r.Buffered() == 0 {
				break // following a live file: do not wait to fill a batch
			}
			continue
		}
		line, tooLong, n, err := s.readLine()
		if err == io.EOF {
			if s.mode == modeConsume {
				if len(line) > 0 || tooLong > 0 { // a last line without newline
					s.add(b, line, tooLong, n)
				}
				if err := s.checkUnchanged(); err != nil {
					return nil, false, err
				}
				return b, true, nil
			}
			if b.Len() > 0 {
				break // hand over what we have; wait for more next time
			}
			moved, err := s.followRotation(b)
			if err != nil {
				return nil, false, err
			}
			if moved {
				if b.Len() > 0 {
					break
				}
				continue
			}
			select {
			case <-ctx.Done():
				return b, false, nil
			case <-time.After(s.poll):
			}
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("route %s: read %s at byte %d: %w", s.route, s.path, s.offset, err)
		}
		if s.rotated {
			s.rotatedAt = time.Now() // the rotated file still grows: its writer has not moved on
		}
		payloadBytes += len(line)
		s.add(b, line, tooLong, n)
		if s.mode != modeConsume && s.r.Buffered() == 0 && b.Len() > 0 {
			break // following a live file: do not wait to fill a batch
		}
	}
	s.arenaHint = min(b.PayloadBytes()+b.PayloadBytes()/8, runtime.MaxBatchBytes)
	if err := s.checkUnchanged(); err != nil {
		return nil, false, err
	}
	return b, false, nil
}

// addLines adds, with one copy, the whole lines already in the read
// buffer that go as read (see runtime.Batch.AddLines), at most enough to
// fill the batch to size records and maxBytes of payload, and returns the
// bytes they took. Lines it leaves are read one by one (readLine, add):
// a blank one, one to trim or dead-letter, a follow mode's line whose
// start is kept from an earlier read, a rotated file's last ones, and
// every line when records carry source_metadata.
func (s *fileSource) addLines(b *runtime.Batch, size, maxBytes int) int {
	if s.meta || s.rotated || len(s.partial) > 0 || s.partialLen > 0 || s.r.Buffered() == 0 || s.markAhead() {
		return 0
	}
	buf, _ := s.r.Peek(s.r.Buffered())
	n, used := b.AddLines(buf, size-b.Len(), maxBytes, s.maxRecord, s.nextSeq, s.offset)
	if n == 0 {
		return 0
	}
	s.r.Discard(used)
	s.nextSeq += uint64(n)
	s.offset += int64(used)
	return used
}

// addBlock fills b's block with the whole lines that go as read, from
// the read buffer and as many reads as blockBytes takes, and returns how
// many it added. It stops before a line that does not (AddBlock's
// stops), one longer than the read buffer, and an unterminated last
// line: Next reads those one by one.
func (s *fileSource) addBlock(b *runtime.Batch) int {
	if s.rotated || len(s.partial) > 0 || s.partialLen > 0 || s.markAhead() {
		return 0
	}
	lines := 0
	for b.PayloadBytes() < blockBytes {
		if s.r.Buffered() == 0 {
			n, more := s.readBlock(b)
			lines += n
			if more {
				continue
			}
			break
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		n, used := b.AddBlock(buf, blockBytes-b.PayloadBytes(), s.maxRecord, s.nextSeq, s.offset)
		if n > 0 {
			s.r.Discard(used)
			s.nextSeq += uint64(n)
			s.offset += int64(used)
			lines += n
			continue
		}
		if len(buf) > 0 && (bytes.IndexByte(buf, '\n') >= 0 || len(buf) >= readBufferBytes) {
			break // a line AddBlock stops at, or one longer than the buffer
		}
		// Only the start of a line is buffered, or nothing: read more.
		if _, err := s.r.Peek(len(buf) + 1); err != nil {
			break // the end of the file, or an error: Next reads it again
		}
	}
	return lines
}

// readBlock reads the file straight into b's block, once the read buffer
// is empty, and adds the lines that go as read: it returns how many, and
// whether to go on (the block has room and the file more lines). What the
// read brought and the block did not take waits in s.file.pending for
// the next read, the block's or the read buffer's.
func (s *fileSource) readBlock(b *runtime.Batch) (lines int, more bool) {
	room := b.BlockSpace(blockBytes - b.PayloadBytes())
	if len(s.file.pending) >= len(room) {
		return 0, false // a line longer than the room left: Next reads it
	}
	k := copy(room, s.file.pending) // the start of a line an earlier read left
	got, err := s.f.Read(room[k:])
	data := room[:k+got]
	n, used := b.AddBlock(data, len(data), s.maxRecord, s.nextSeq, s.offset)
	s.nextSeq += uint64(n)
	s.offset += int64(used)
	s.file.pending = append(s.file.pending[:0], data[used:]...)
	switch {
	case err != nil || got == 0:
		return n, false // the end of the file, or an error: Next reads it again
	case n > 0:
		// Go on unless the room left is too small for a read worth it.
		return n, blockBytes-b.PayloadBytes() >= minBlockRead
	case bytes.IndexByte(data, '\n') >= 0 || len(data) == len(room):
		return 0, false // a line AddBlock stops at, or one longer than the room left
	}
	return 0, true // only the start of a line so far: read on
}

// add appends a record for line (n bytes of file consumed). Blank lines are
// skipped without taking an index, which keeps numbering deterministic.
func (s *fileSource) add(b *runtime.Batch, line []byte, tooLong, n int) {
	if s.offset == 0 {
		line = runtime.TrimByteOrderMark(line, s.format)
	}
	s.offset += int64(n)
	if tooLong == 0 && blank(line) {
		return
	}
	rec := runtime.Record{Seq: s.nextSeq, Next: s.offset}
	if s.meta {
		rec.Meta = map[string]string{
			metaFile: s.metaPath,
			metaLine: strconv.FormatUint(s.nextSeq-s.fileFirst, 10),
		}
	}
	if tooLong > 0 {
		rec.DeadLetter(fmt.Sprintf("record of %d bytes exceeds max_record_bytes = %d (payload truncated to %d bytes)", tooLong, s.maxRecord, len(line)))
	}
	s.nextSeq++
	b.AddCopy(rec, line)
}

// markAhead reports whether the next line starts the file and may start
// with a byte-order mark: the lines that go as read (addLines, addBlock)
// leave such a line to readLine and add, which drops the mark
// (runtime.TrimByteOrderMark), so that it is dropped on every path.
func (s *fileSource) markAhead() bool {
	if s.offset != 0 || s.format == "raw" {
		return false
	}
	b, _ := s.r.Peek(1)
	return len(b) == 0 || b[0] == runtime.UTF8BOMFirstByte
}

// trimLineEnd is line without its trailing CR and LF bytes, as
// bytes.TrimRight(line, "\r\n") has it, without building a set per line.
func trimLineEnd(line []byte) []byte {
	for n := len(line); n > 0; n-- {
		if c := line[n-1]; c != '\n' && c != '\r' {
			return line[:n]
		}
	}
	return line[:0]
}

// blank reports whether line holds only white space. Nearly every line
// starts with a printable byte, which settles it without a scan.
func blank(line []byte) bool {
	if len(line) > 0 && line[0] > ' ' {
		return false
	}
	return len(bytes.TrimSpace(line)) == 0
}

// readLine returns the next line without its line ending and the number
// of bytes it took in the file. A line longer than max_record_bytes is read
// through to its newline without keeping more than a snippet: tooLong is
// then its full length. At the end of a follow-mode file an unterminated
// line is kept in s.partial and io.EOF returned.
func (s *fileSource) readLine() (line []byte, tooLong, n int, err error) {
	held := len(s.partial) // read before the end of the file, in an earlier call
	s.scratch = append(s.scratch[:0], s.partial...)
	total := max(s.partialLen, len(s.partial))
	over := total > s.maxRecord+2
	s.partial, s.partialLen = s.partial[:0], 0
	for {
		chunk, err := s.r.ReadSlice('\n')
		total += len(chunk)
		if !over {
			if len(s.scratch)+len(chunk) > s.maxRecord+2 { // +2: the line ending is not part of the record
				over = true
				keep := min(runtime.DLQSnippetBytes, len(s.scratch)+len(chunk))
				s.scratch = append(s.scratch, chunk[:max(0, keep-len(s.scratch))]...)
			} else if err == nil && len(s.scratch) == 0 {
				line = chunk // fast path: the whole line is in the buffer
			} else {
				s.scratch = append(s.scratch, chunk...)
			}
		}
		switch {
		case err == nil:
			if line == nil {
				line = s.scratch
			}
			if held > 0 && !s.stillHeld(s.scratch[:held]) {
				s.log.Warn("the unterminated last line was rewritten (its writer cut it and wrote on, as mqb's file sink does after a crash): reading the line again from its start",
					"path", s.path, "offset", s.offset)
				return nil, 0, 0, s.rewindLine()
			}
			content := trimLineEnd(line)
			if over || len(content) > s.maxRecord {
				return runtime.Snippet(content), max(total-1, len(content)), total, nil
			}
			return content, 0, total, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if s.mode != modeConsume {
				// Keep the unterminated line (or, once too long, a snippet
				// and its length) for when its newline arrives; the offset
				// moves only when the record is complete.
				s.partial = append(s.partial, s.scratch...)
				s.partialLen = total
				return nil, 0, 0, io.EOF
			}
			content := bytes.TrimRight(s.scratch, "\r")
			if over || len(content) > s.maxRecord {
				return runtime.Snippet(content), total, total, io.EOF
			}
			return content, 0, total, io.EOF
		default:
			return nil, 0, 0, err
		}
	}
}

// stillHeld reports whether the file still holds held, the start of the
// line at s.offset that an earlier read found unterminated. A writer that
// cut that line and wrote on (mqb's file sink drops a torn last line when
// it starts again after a crash) has put other bytes there: the line read
// on from where the held bytes ended would glue the cut fragment to the
// middle of a new line, a record nobody wrote, and lose the one whose
// start it hides.
func (s *fileSource) stillHeld(held []byte) bool {
	s.heldCheck = slices.Grow(s.heldCheck[:0], len(held))[:len(held)]
	n, _ := s.f.ReadAt(s.heldCheck, s.offset)
	return n == len(held) && bytes.Equal(s.heldCheck, held)
}

// rewindLine forgets what was read of the line at s.offset and reads the
// file again from there. It returns io.EOF when that succeeds, as at the
// end of a follow-mode file, so the caller polls and reads on.
func (s *fileSource) rewindLine() error {
	s.partial, s.partialLen = s.partial[:0], 0
	if _, err := s.f.Seek(s.offset, io.SeekStart); err != nil {
		return fmt.Errorf("route %s: file source %s: seek: %w", s.route, s.path, err)
	}
	if s.blocks {
		s.file.pending = s.file.pending[:0]
		s.r.Reset(&s.file)
	} else {
		s.r.Reset(s.f)
	}
	return io.EOF
}

// followRotation is called by a follow mode at the end of its file. When
// the path names another file than the one open (rotated: renamed away and
// a new file created), the open one is read until it has not grown for
// rotateGrace (its writer may still hold it); an unterminated last line is
// then taken as the finished file's last record, and the source moves to
// the new file from byte 0 with its own identity.
// A file truncated or rewritten in place is read again from its start. It
// reports whether there is something to read at once.
func (s *fileSource) followRotation(b *runtime.Batch) (bool, error) {
	if !s.rotated {
		st, err := os.Stat(s.path)
		if err != nil {
			return false, nil // renamed away, no new file yet: the old one may still grow
		}
		var dev, ino uint64
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			dev, ino = uint64(sys.Dev), uint64(sys.Ino)
		}
		switch {
		case dev != s.id.Dev || ino != s.id.Ino:
			s.rotated, s.rotatedAt = true, time.Now()
			return true, nil // read the old file to its end once more
		case st.Size() < s.offset+int64(max(s.partialLen, len(s.partial))):
			if same, err := s.headUnchanged(); err == nil && same && st.Size() >= s.offset && int64(s.id.HeadLen) <= s.offset {
				// Only the unterminated last line was cut: the records
				// before it are still there, and its writer may write it
				// again (see stillHeld).
				s.log.Warn("the unterminated last line was cut: reading the line again from its start when it is written",
					"path", s.path, "offset", s.offset)
				if err := s.rewindLine(); err != io.EOF {
					return false, err
				}
				return false, nil
			}
			s.truncated = true
		default:
			head, err := headHash(s.f, s.id.HeadLen)
			if err != nil || head == s.id.Head {
				return false, nil
			}
			s.truncated = true // rewritten in place
		}
		s.log.Warn("the file was truncated or rewritten in place: reading it again from its start", "path", s.path, "offset", s.offset)
		s.partial, s.partialLen = s.partial[:0], 0 // its bytes are gone with the old content
		return s.switchFile()
	}
	if time.Since(s.rotatedAt) < rotateGrace {
		return false, nil // its writer may not have moved on yet
	}
	if len(s.partial) > 0 || s.partialLen > 0 {
		s.takePartial(b)
	}
	return s.switchFile()
}

// switchFile moves to the file now at the path, from byte 0.
func (s *fileSource) switchFile() (bool, error) {
	f, err := os.Open(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
	}
	cur, _, err := identify(f)
	if err != nil {
		f.Close()
		return false, fmt.Errorf("route %s: file source %s: %w", s.route, s.path, err)
	}
	if !s.truncated {
		s.log.Info("the file was rotated: the old one is read to its end; reading the new one from its start", "path", s.path)
	}
	s.f.Close()
	s.f, s.id, s.offset = f, cur, 0
	s.fileFirst = s.nextSeq
	s.id.Parts = partsKey(s.route, cur)
	s.r.Reset(f)
	s.rotated, s.truncated = false, false
	s.bytesRead.Store(0)
	s.segMu.Lock()
	s.segs = append(s.segs, fileSeg{first: s.nextSeq, start: 0, id: s.id})
	s.segMu.Unlock()
	return true, nil
}

// takePartial takes the kept unterminated line as a record: its file is
// finished.
func (s *fileSource) takePartial(b *runtime.Batch) {
	total := max(s.partialLen, len(s.partial))
	content := bytes.TrimRight(s.partial, "\r")
	tooLong := 0
	if total > s.maxRecord {
		tooLong, content = total, runtime.Snippet(content)
	}
	line := append([]byte(nil), content...)
	s.partial, s.partialLen = s.partial[:0], 0
	s.add(b, line, tooLong, total)
}

// refuseSpecial refuses a path that names a named pipe, a socket or a
// device: no position in one can be read again, and opening a named pipe
// blocks in the system call until a writer opens it, where neither a
// drain nor SIGTERM reaches (the route hung before its first record).
// A path that does not exist (yet) is left to the open.
func refuseSpecial(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() || st.IsDir() {
		return nil
	}
	what := "a device"
	switch {
	case st.Mode()&os.ModeNamedPipe != 0:
		what = "a named pipe"
	case st.Mode()&os.ModeSocket != 0:
		what = "a socket"
	}
	return fmt.Errorf("%s is %s, not a regular file: a file source reads files it can read again from a position", path, what)
}
