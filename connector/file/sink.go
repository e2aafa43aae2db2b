package file

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mqb-dev/mqb/runtime"
)

// fileSink appends one line per record to a file (name_by = write_time),
// fsyncing once per write, or, once the route said so (SyncOnCommit), once
// per commit: the route commits a position only after Sync made the
// lines before it durable.
//
// mqb cuts only what it wrote: a sidecar file beside the sink file
// (.<name>.mqb-length) records the file's length after every write mqb
// fsynced. On reopen, an unterminated last line that starts at or past that
// length is a write mqb never finished (a crash mid-write) and is cut; bytes
// before it are never touched. A file mqb has no record of (no sidecar, or
// one for another inode) is foreign: it is appended to untouched, after a
// newline if its last line has none. A path that is a symbolic link is
// refused (O_NOFOLLOW): mqb does not write through links.
type fileSink struct {
	route string
	path  string
	// envelope writes {"error", "meta", "payload"} lines instead of the bare
	// payload: a DLQ file must say why each record is there.
	envelope bool

	mu     sync.Mutex
	f      *os.File
	owned  *os.File // the sidecar
	dev    uint64
	ino    uint64
	length int64 // the length recorded in the sidecar
	buf    []byte
	// syncOnCommit: writes are made durable by Sync, called by the
	// route's commit, not each by its own fsync. unsynced says a write
	// returned since the last Sync; syncErr is a failed fsync's error,
	// kept: the bytes it covered may be lost, and nothing may be
	// committed past them.
	syncOnCommit bool
	unsynced     bool
	syncErr      error
	// notStarted is how many bytes at the file's end were appended since
	// the sink last started writeback or the commit's fsync.
	notStarted int64
}

// fileSinkConfig is a file sink's attributes (stdlib declares them).
type fileSinkConfig struct {
	Path        string `attr:"path"`
	Format      string `attr:"format"`
	NameBy      string `attr:"name_by"`
	Idempotency bool   `attr:"idempotency"` // deprecated: name_by = source_position
}

func init() {
	runtime.RegisterSink("file", func(b *runtime.BuildEnv, cfg *fileSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		nameBy := cfg.NameBy
		if !b.IsSet("name_by") && cfg.Idempotency {
			nameBy = "source_position"
		}
		switch nameBy {
		case "write_time", "auto":
			s, err := newFileSink(b, cfg.Path, b.DeadLetterTarget())
			if err != nil {
				return nil, nil, err
			}
			return s, nil, nil
		default: // source_position
			if b.DeadLetterTarget() {
				return nil, nil, b.Errorf("name_by", "a dead-letter file is written by time; source_position is not supported there")
			}
			epoch := ""
			if !b.Source().Replayable() {
				epoch = fmt.Sprintf("%020d", time.Now().UnixNano())
			}
			s, err := newPartSink(b, cfg.Path, epoch)
			if err != nil {
				return nil, nil, err
			}
			return s, nil, nil
		}
	}, runtime.ListsOutputs(fileOutputs))
}

// fileOutputs is the file or part directory a file sink writes, for
// `mqbc state`.
func fileOutputs(b *runtime.BuildEnv, cfg *fileSinkConfig) []runtime.OutputState {
	if cfg.Path == "" || cfg.Path == "-" {
		return nil
	}
	path := runtime.LocalPath(b, cfg.Path)
	nameBy := cfg.NameBy
	if !b.IsSet("name_by") && cfg.Idempotency {
		nameBy = "source_position"
	}
	parts := nameBy == "source_position"
	return []runtime.OutputState{{Path: path, Parts: parts, Gone: runtime.OutputGone(path, parts)}}
}

func newFileSink(b *runtime.BuildEnv, path string, envelope bool) (*fileSink, error) {
	if path == "" {
		return nil, b.Errorf("path", "required")
	}
	if !filepath.IsAbs(path) && b.BaseDir() != "" {
		path = filepath.Join(b.BaseDir(), path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, b.Errorf("path", "%v", err)
		}
	}
	f, err := openNoFollow(path, os.O_RDWR|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return nil, b.Errorf("path", "%v", err)
	}
	s := &fileSink{route: b.Route(), path: path, envelope: envelope, f: f}
	if err := s.takeOver(); err != nil {
		s.Close()
		return nil, b.Errorf("path", "repair %s: %v", path, err)
	}
	return s, nil
}

// openNoFollow opens path for writing, refusing a symbolic link.
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link: mqb does not write through links; give the path of the file itself", path)
	}
	return f, err
}

// sidecarPath is where mqb records the length of the sink file at path.
func sidecarPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".mqb-length")
}

// sidecarFormat has fixed-width numbers, so rewriting it in place never
// leaves a longer earlier record's tail behind.
// tail hashes the last bytes before length, so a file replaced by another
// that took the same inode is not taken for mqb's.
const sidecarFormat = "mqb file sink v1 dev=%020d ino=%020d length=%020d tail=%016x\n"

// sidecarTailBytes is how much of the file before the recorded length the
// sidecar's tail hash covers.
const sidecarTailBytes = 64

// tailHash hashes the up to sidecarTailBytes bytes before length.
func tailHash(f *os.File, length int64) (uint64, error) {
	n := min(length, sidecarTailBytes)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, length-n); err != nil && n > 0 {
		return 0, err
	}
	sum := sha256.Sum256(buf)
	return binary.BigEndian.Uint64(sum[:8]), nil
}

// takeOver opens the sidecar and repairs the file's tail (see fileSink).
func (s *fileSink) takeOver() error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	s.owned, err = openNoFollow(sidecarPath(s.path), os.O_RDWR|os.O_CREATE)
	if err != nil {
		return err
	}
	recorded := int64(-1)
	var rec [128]byte
	if n, _ := s.owned.ReadAt(rec[:], 0); n > 0 {
		var dev, ino, tail uint64
		var length int64
		if _, err := fmt.Sscanf(string(rec[:n]), sidecarFormat, &dev, &ino, &length, &tail); err == nil && dev == s.dev && ino == s.ino && length <= st.Size() {
			if h, err := tailHash(s.f, length); err == nil && h == tail {
				recorded = length
			}
		}
	}
	if recorded < 0 {
		// Not a file mqb has written (or it was truncated since): its
		// bytes are not mqb's. Append after them, on a line of our own.
		if st.Size() > 0 && lastByte(s.f, st.Size()) != '\n' {
			if _, err := s.f.Write([]byte{'\n'}); err != nil {
				return err
			}
			if err := s.f.Sync(); err != nil {
				return err
			}
		}
	} else if err := s.dropTornTail(recorded); err != nil {
		return err
	}
	if err := s.record(); err != nil {
		return err
	}
	return s.owned.Sync()
}

func lastByte(f *os.File, size int64) byte {
	var b [1]byte
	f.ReadAt(b[:], size-1)
	return b[0]
}

// record writes the file's current length to the sidecar.
func (s *fileSink) record() error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	s.length = st.Size()
	tail, err := tailHash(s.f, s.length)
	if err != nil {
		return err
	}
	_, err = s.owned.WriteAt([]byte(fmt.Sprintf(sidecarFormat, s.dev, s.ino, s.length, tail)), 0)
	return err
}

// dropTornTail truncates an unterminated last line that starts at or past
// from, the length mqb recorded after its last fsynced write. The sink
// writes whole lines and acks them only after fsync, so such a line is
// what a crash (or a failed write) left of a write that was never acked:
// its records are written again, and appending after the fragment would
// glue the next record onto it. An unterminated line that starts before
// from is not mqb's: it is kept, and closed with a newline.
func (s *fileSink) dropTornTail(from int64) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 || lastByte(s.f, size) == '\n' {
		return nil
	}
	// The line is mqb's if it starts at or past from: look for its start
	// back to byte from-1 (mqb's last line ends there), no further.
	lo := max(0, from-1)
	buf := make([]byte, 64<<10)
	start := int64(-1) // where the unterminated line starts, if at or past from
	if from == 0 {
		start = 0
	}
	for end := size; end > lo; {
		n := min(int64(len(buf)), end-lo)
		if _, err := s.f.ReadAt(buf[:n], end-n); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			start = end - n + int64(i) + 1
			break
		}
		end -= n
	}
	if start >= from {
		return s.f.Truncate(start)
	}
	_, err = s.f.Write([]byte{'\n'})
	return err
}

func (s *fileSink) Write(_ context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := runtime.AppendLines(s.buf[:0], recs, s.envelope)
	s.buf = buf
	return s.appendLocked(buf)
}

// WritesLines: the sink writes bare payload lines, except as a DLQ's
// target (envelopes).
func (s *fileSink) WritesLines() bool { return !s.envelope }

// WriteLines appends lines, the lines of batches as their source read
// them (see runtime.LineSink), as Write appends its records' lines.
func (s *fileSink) WriteLines(_ context.Context, lines [][]byte) error {
	if len(lines) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendLocked(lines...)
}

// appendLocked appends whole lines to the file, fsyncs it and records its
// length in the sidecar (syncing on commit, Sync does both). A failed
// write leaves no part of a line behind that a retry would glue the next
// one onto.
func (s *fileSink) appendLocked(chunks ...[]byte) error {
	if s.syncErr != nil {
		return s.syncErr
	}
	var written int64
	for _, buf := range chunks {
		if _, err := s.f.Write(buf); err != nil {
			s.dropTornTail(s.length) // best effort: the retry appends whole lines again
			return runtime.Retryable(fmt.Errorf("route %s: file sink %s: write: %w", s.route, s.path, err))
		}
		written += int64(len(buf))
	}
	if s.syncOnCommit {
		s.unsynced = true
		// A route moving blocks of lines starts them on their way to the
		// disk now rather than all at the commit's fsync.
		s.notStarted += written
		if s.notStarted >= writebackBytes {
			if end, err := s.f.Seek(0, io.SeekCurrent); err == nil {
				writeback(s.f, end-s.notStarted, s.notStarted)
			}
			s.notStarted = 0
		}
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return runtime.Retryable(fmt.Errorf("route %s: file sink %s: fsync: %w", s.route, s.path, err))
	}
	// Not fsynced: a length older than the file's only protects more.
	if err := s.record(); err != nil {
		return runtime.Retryable(fmt.Errorf("route %s: file sink %s: record its length in %s: %w", s.route, s.path, sidecarPath(s.path), err))
	}
	return nil
}

// writebackBytes is how much a sink syncing on commit appends before it
// starts writing those bytes to the disk (startWriteback), in one range
// whatever the writes that made it up: a few groups of blocks of lines.
// The kernel's work per range (the extents mapped, the bios submitted)
// made a range for each group of two 256 KiB blocks cost a tenth more
// system CPU on a 10M-line route than 1 MiB ranges do.
const writebackBytes = 1 << 20

// writeback is startWriteback; a test sees the ranges through it.
var writeback = startWriteback

// SyncOnCommit: from now on writes are made durable by Sync (see
// runtime.CommitSyncSink).
func (s *fileSink) SyncOnCommit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.syncOnCommit = true
}

// Sync makes every write that returned before it durable and records the
// file's length in the sidecar. The fsync runs without the lock, so the
// route goes on writing meanwhile: a write that returned before Sync was
// called is in the file before the fsync starts.
func (s *fileSink) Sync() error {
	s.mu.Lock()
	if s.syncErr != nil || !s.unsynced {
		s.mu.Unlock()
		return s.syncErr
	}
	s.unsynced = false
	s.notStarted = 0 // the fsync writes them
	s.mu.Unlock()
	err := s.f.Sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.syncErr = fmt.Errorf("route %s: file sink %s: fsync: %w (lines written since the last commit may be lost: the route stops without committing past them)", s.route, s.path, err)
		return s.syncErr
	}
	// Not fsynced: a length older than the file's only protects more.
	if err := s.record(); err != nil {
		s.unsynced = true // record it at the next commit
		return fmt.Errorf("route %s: file sink %s: record its length in %s: %w", s.route, s.path, sidecarPath(s.path), err)
	}
	return nil
}

func (s *fileSink) Close() error {
	if s == nil { // a sink that failed to open, in an interface
		return nil
	}
	var err error
	if s.syncOnCommit {
		err = s.Sync() // writes after the last commit: durable whatever comes next
	}
	if s.owned != nil {
		err = errors.Join(err, s.owned.Sync(), s.owned.Close())
	}
	return errors.Join(s.f.Close(), err)
}

// partSink writes immutable part files named for the element positions
// they cover (name_by = source_position): path is a directory; each batch
// is grouped into runs of consecutive elements (records, or the elements
// an unnest made of them), each run staged to a temp name, fsynced and
// renamed. At start-up the existing parts are listed and a replayed
// element whose position is covered is skipped, element by element, so
// batch boundaries may differ between runs and a part may end inside a
// record's elements.
type partSink struct {
	route string
	dir   string
	src   runtime.Source // names the parts (its Name), once it is open
	epoch string         // follow-mode sources: positions restart each run

	mu     sync.Mutex
	source string // the source's name in the part names; "" until listed
	// legacy are other source names whose parts cover this source's
	// positions (parts written before names carried the file's identity).
	legacy  []string
	covered runtime.PartitionRanges
	before  runtime.PartitionRanges // the part of covered listed at start-up
	// routeSink: the route's own sink (MarkRouteSink), not a
	// branch of a structural output nor a handler.
	routeSink bool
	listErr   error
	buf       []byte
}

// partNameRE parses a part file name: part-<source>-<partition>-<span>.jsonl,
// numbers zero-padded, the span <start>-<end> for whole records with
// element indexes where it starts or ends inside a record's elements
// (runtime.PartSpan). Parts written before sources had partitions lack
// the partition and cover partition 0. A file source's name is
// <base>.<route>.<key of the file's identity>; before part names carried
// identities it was the base name alone.
var partNameRE = regexp.MustCompile(`^part-(.+?)(?:-(\d{10}))?-(` + runtime.PartSpanPattern + `)\.jsonl$`)

func partFileName(source string, partition int32, span runtime.PartSpan) string {
	return fmt.Sprintf("part-%s-%010d-%s.jsonl", source, partition, span)
}

func newPartSink(b *runtime.BuildEnv, dir, epoch string) (*partSink, error) {
	if dir == "" {
		return nil, b.Errorf("path", "required")
	}
	if !filepath.IsAbs(dir) && b.BaseDir() != "" {
		dir = filepath.Join(b.BaseDir(), dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, b.Errorf("path", "Failed to create part-file sink directory: %v", err)
	}
	s := &partSink{route: b.Route(), dir: dir, src: b.Source(), epoch: epoch, covered: runtime.PartitionRanges{}, before: runtime.PartitionRanges{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, b.Errorf("path", "list part files: %v", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".part-") && strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(dir, name)) // a write that never committed
		}
	}
	return s, nil
}

// listLocked reads the ranges the existing parts cover, once: the part
// names carry the source's name, which a file source knows only once it
// has opened its file (they name the file, not only the path).
func (s *partSink) listLocked() error {
	if s.source != "" || s.listErr != nil {
		return s.listErr
	}
	source := s.src.Name()
	if s.epoch != "" {
		source += "-" + s.epoch
	} else {
		s.legacy = runtime.LegacyPartSources(s.src)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.listErr = fmt.Errorf("route %s: file sink %s: list part files: %w", s.route, s.dir, err)
		return s.listErr
	}
	for _, e := range entries {
		m := partNameRE.FindStringSubmatch(e.Name())
		if m != nil && m[1] != source && !slices.Contains(s.legacy, m[1]) && s.epoch == "" {
			if other, ok := runtime.PartsOfAnotherRoute(s.src, m[1]); ok {
				s.listErr = fmt.Errorf("route %s: file sink %s: it holds parts of this same input written by route %s (%s): parts are named by their route, so this route would write every record again beside them. "+
					"If %s is route %s renamed, give it its old name back; if the parts are another route's on purpose, give this route a directory of its own",
					s.route, s.dir, other, e.Name(), s.route, other)
				return s.listErr
			}
		}
		if m == nil || (m[1] != source && !slices.Contains(s.legacy, m[1])) {
			continue
		}
		var part uint64
		var err0 error
		if m[2] != "" {
			part, err0 = strconv.ParseUint(m[2], 10, 31)
		}
		span, err1 := runtime.ParsePartSpan(m[3])
		if err0 != nil || err1 != nil {
			continue
		}
		s.covered.Add(int32(part), span)
		s.before.Add(int32(part), span)
	}
	s.source = source
	return nil
}

func (s *partSink) Write(_ context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.listLocked(); err != nil {
		return err
	}
	var live []*runtime.Record
	for _, r := range recs {
		if s.covered.Contains(r) {
			// In a part already (a record, or one element of one). One
			// of an earlier run: as the route's sink, it counts the
			// record as deduplicated (in a branch,
			// the record is the other branches' too, and keeps its
			// state). One of an earlier attempt of this write: delivered.
			if s.routeSink && s.before.Contains(r) {
				r.MarkDuplicate()
			}
			continue
		}
		live = append(live, r)
	}
	wrote := false
	for _, run := range runtime.PositionRuns(live) {
		if err := s.writeRun(run); err != nil {
			return err
		}
		wrote = true
	}
	if wrote {
		if err := syncDir(s.dir); err != nil {
			return runtime.Retryable(fmt.Errorf("route %s: file sink %s: fsync directory: %w", s.route, s.dir, err))
		}
	}
	return nil
}

func (s *partSink) writeRun(run []*runtime.Record) error {
	// A record that cannot be encoded fails alone; the rest of its run is
	// written.
	buf := runtime.AppendLines(s.buf[:0], run, false)
	s.buf = buf
	part, span := run[0].Partition, runtime.SpanOf(run[0], run[len(run)-1])
	name := partFileName(s.source, part, span)
	final := filepath.Join(s.dir, name)
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	if err := writeFileSync(tmp, buf); err != nil {
		os.Remove(tmp)
		return runtime.Retryable(fmt.Errorf("route %s: file sink %s: %w", s.route, s.dir, err))
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return runtime.Retryable(fmt.Errorf("route %s: file sink %s: rename part: %w", s.route, s.dir, err))
	}
	s.covered.Add(part, span)
	return nil
}

// writeFileSync writes a new file at path (a temporary name: whatever is
// there, a link included, is removed first, never written through).
func writeFileSync(path string, data []byte) error {
	os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *partSink) Close() error { return nil }

// MarkRouteSink tells the part sink it is the route's own sink, not a
// branch of a switch or fanout. Covered records are skipped by Write, not
// before the route's steps: the steps have to see them. A dedup step in
// front of the sink remembers the key of every record it lets through,
// and the key of a record already in a part must be remembered too: after
// a kill between the part's write and the promotion of its keys, a later
// repeat of that key would otherwise pass the dedup step on the next run
// and land, where a run without the kill dropped it. Write skips the
// covered records and, the sink being the route's, counts them as
// deduplicated.
func (s *partSink) MarkRouteSink() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routeSink = true
}
