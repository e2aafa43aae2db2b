package file

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
	"github.com/mqb-dev/mqb/stdlib"
)

// globSource reads every file a glob pattern (or a directory, written with
// a trailing slash) names, in name order, one at a time, each through a
// fileSource of its own: the same line reading, the same identity checks.
//
// Its one partition numbers records across the files (Seq), and each
// record's file is kept in segs, so the checkpoint names the file the
// committed position is in, by path and identity, with the byte offset in
// it, or says that file was read to its end ("done"). A resumed consume
// route skips every file that sorts before the checkpoint's, and resumes
// inside that one only if it is still the file the checkpoint was taken
// in (fileSource.resume): a file replaced or shortened since is refused,
// never read from an offset into other content. A checkpoint's file that
// is gone is refused too unless it was read to its end: its unread lines
// would be lost quietly.
//
// consume lists the files at open, and again before each next file (at
// most every relistEvery, and once the list runs out): a file added later
// is read by this run, or the next, when its name sorts after the last
// one opened. One sorting before a file the route has read past would
// never be read: the run stops (relistConsume), and a resumed route
// refuses a file sorting before its checkpoint's whose inode changed after
// the listing that file was opened after (checkPassed; the listing's time
// is kept in the checkpoint). subscribe starts
// at the end of the last file and reads each file that appears with a
// name sorting after the last one known, from its start, once the current
// one has stopped growing for rotateGrace. group_subscribe is refused (the
// compiler says so first, E052): it follows one file through renames, and
// a rename within a glob is another name of the glob.
type globSource struct {
	tmpl    *fileSource // the configuration each file's reader starts from (never opened)
	pattern string      // absolute; a directory ends in a separator
	written string      // the path attribute as written
	baseDir string      // what a relative path is relative to ("": the working directory)
	dir     bool
	key     string // short hash of the route and pattern, for part names
	state   string // where the checkpoint is, for messages

	listed []string // files to read, in name order, not yet opened
	last   string   // the greatest file listed or read
	// known holds every name a consume-mode listing has returned: a name
	// a later listing returns that is not here appeared since.
	known map[string]bool
	seen  map[[2]uint64]bool
	cur   *fileSource
	// nextSeq is the Seq of the next record once cur is finished (cur
	// keeps its own while it reads).
	nextSeq   uint64
	openCP    checkpoint.Position
	haveCP    bool
	arenaHint int

	// follow mode: when the current file last changed, and when the
	// pattern was last listed again.
	idleSince  time.Time
	idleSize   int64
	listedAt   time.Time
	doneBytes  atomic.Int64
	totalBytes atomic.Int64
	reading    atomic.Pointer[fileSource] // cur, for Progress

	mu   sync.Mutex
	segs []globSeg
}

// globSeg is the run of Seqs read from one file of the glob.
type globSeg struct {
	fileSeg
	path      string
	fileFirst uint64 // Seq of the file's first record (its line 0)
	end       uint64 // Seq after its last record, once complete
	complete  bool
	// listed is when the listing the file was opened after began (unix
	// nanoseconds): every file sorting before it that existed then was
	// read before it.
	listed int64
}

// relistEvery bounds how often a follow-mode glob is listed again while
// it waits at the end of its current file.
const relistEvery = 500 * time.Millisecond

func newGlobSource(b *runtime.BuildEnv, tmpl *fileSource, written string) (runtime.Source, error) {
	if err := stdlib.CheckFileGlob(written); err != nil {
		return nil, b.Errorf("path", "malformed glob pattern %q: %v", written, err)
	}
	if tmpl.mode == modeGroupSubscribe {
		return nil, b.Errorf("mode", "group_subscribe follows one file through its rotations and cannot read a glob or a directory; use consume or subscribe")
	}
	g := &globSource{tmpl: tmpl, pattern: tmpl.path, written: written, baseDir: b.BaseDir(), dir: strings.HasSuffix(written, "/"), seen: map[[2]uint64]bool{}, known: map[string]bool{}}
	if g.dir {
		g.pattern = strings.TrimSuffix(g.pattern, string(filepath.Separator)) + string(filepath.Separator)
	}
	h := sha256.Sum256([]byte("mqb-file-glob\x00" + tmpl.route + "\x00" + g.pattern))
	g.key = hex.EncodeToString(h[:6])
	return g, nil
}

// Name is the name the glob's part files carry: the pattern's directory,
// the route and a key of the pattern.
func (g *globSource) Name() string {
	base := partSafe(filepath.Base(strings.TrimSuffix(g.patternDir(), string(filepath.Separator))))
	if base == "" {
		base = "files"
	}
	return base + ".glob." + partSafe(g.tmpl.route) + "." + g.key
}

func (g *globSource) patternDir() string {
	if g.dir {
		return g.pattern
	}
	return filepath.Dir(g.pattern)
}

// Replayable is false: a glob numbers records across its files, and which
// files match can change between runs (one added, one deleted), so a
// position does not name the same record on every run.
func (g *globSource) Replayable() bool     { return false }
func (g *globSource) Finite() bool         { return g.tmpl.mode == modeConsume }
func (g *globSource) RecordFormat() string { return g.tmpl.format }
func (g *globSource) SeqGaps() bool        { return false }

// Progress is in bytes over the files listed at open (consume).
func (g *globSource) Progress() (read, size int64, ok bool) {
	read = g.doneBytes.Load()
	if c := g.reading.Load(); c != nil {
		read += c.bytesRead.Load()
	}
	size = g.totalBytes.Load()
	return read, size, size > 0 && g.tmpl.mode == modeConsume
}

// list returns the regular files the pattern names now, in name order.
func (g *globSource) list() ([]string, error) {
	var names []string
	if g.dir {
		entries, err := os.ReadDir(g.pattern)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				names = append(names, filepath.Join(g.pattern, e.Name()))
			}
		}
	} else {
		var err error
		if names, err = filepath.Glob(g.pattern); err != nil {
			return nil, err
		}
	}
	out := names[:0]
	for _, n := range names {
		if st, err := os.Stat(n); err == nil && st.Mode().IsRegular() {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// writtenPath is the file at path as the path attribute would spell it:
// relative to the .mqb file when the attribute is.
func (g *globSource) writtenPath(path string) string {
	if filepath.IsAbs(g.written) || g.baseDir == "" {
		return filepath.Clean(path)
	}
	if rel, err := filepath.Rel(g.baseDir, path); err == nil {
		return rel
	}
	return path
}

func (g *globSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, host runtime.SourceHost) error {
	g.state = runtime.CheckpointLocation(host)
	g.listedAt = listingStart()
	names, err := g.list()
	if err != nil {
		if g.tmpl.mode == modeConsume || !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("route %s: file source %s: %w", g.tmpl.route, g.written, err)
		}
		names = nil // subscribe waits for the directory
	}
	var total int64
	for _, n := range names {
		if st, err := os.Stat(n); err == nil {
			total += st.Size()
		}
	}
	g.totalBytes.Store(total)
	switch g.tmpl.mode {
	case modeSubscribe:
		// Start at the end of the last file, as a single file does.
		if len(names) > 0 {
			last := names[len(names)-1]
			g.last = last
			return g.openFile(last, checkpoint.Position{}, false, false)
		}
		return nil
	case modeConsume:
	default:
		return fmt.Errorf("route %s: file source attribute mode: mode %q cannot read a glob", g.tmpl.route, g.tmpl.mode)
	}
	if len(names) == 0 {
		g.tmpl.log.Warn("file source: the path matches no file", "path", g.written)
	}
	g.listed = names
	for _, n := range names {
		g.known[n] = true
	}
	g.openCP, g.haveCP = cp, haveCP
	if !haveCP || cp.Mode != g.tmpl.mode {
		return nil
	}
	pattern, gp, ok := decodeGlobSource(cp.Source)
	if !ok || pattern != g.pattern {
		return nil // another input: it starts over
	}
	path, _, _ := decodeFileSource(gp.file)
	g.nextSeq = cp.NextIndex
	i, found := slices.BinarySearch(names, path)
	if err := g.checkPassed(names[:i], path, gp.listed); err != nil {
		return err
	}
	if gp.done {
		if found {
			i++
		}
		g.listed = names[i:]
		g.last = path
		g.tmpl.log.Info("resuming from checkpoint: the files up to this one were read", "file", path, "next_index", cp.NextIndex)
		return nil
	}
	if !found {
		in := g.reader(path)
		return in.refuse(cp, "its file "+path+" is gone, and the lines after byte "+strconv.FormatInt(cp.Offset, 10)+" of it were not read")
	}
	g.listed = names[i+1:]
	g.last = path
	fcp := checkpoint.Position{Source: gp.file, Mode: cp.Mode, NextIndex: cp.NextIndex, Offset: cp.Offset}
	g.tmpl.log.Info("resuming from checkpoint", "file", path, "offset", cp.Offset, "next_index", cp.NextIndex)
	if err := g.openFileFirst(path, fcp, gp.first); err != nil {
		return err
	}
	return nil
}

// reader is a fileSource for one file of the glob.
func (g *globSource) reader(path string) *fileSource {
	in := &fileSource{
		route: g.tmpl.route, pipeline: g.tmpl.pipeline, log: g.tmpl.log,
		path: path, mode: g.tmpl.mode, format: g.tmpl.format, maxRecord: g.tmpl.maxRecord, poll: g.tmpl.poll,
		meta: g.tmpl.meta, metaPath: g.writtenPath(path),
		state: g.state,
	}
	return in
}

// openFileFirst opens path resuming at cp, whose file's first record was
// Seq first.
func (g *globSource) openFileFirst(path string, cp checkpoint.Position, first uint64) error {
	in := g.reader(path)
	f, err := os.Open(path)
	if err != nil {
		return in.refuse(cp, fmt.Sprintf("its file cannot be opened: %v", err))
	}
	in.f = f
	in.nextSeq = cp.NextIndex
	if err := in.start(cp, true); err != nil {
		f.Close()
		return err
	}
	in.fileFirst = first
	g.started(in)
	return nil
}

// openFile opens path from its start (subscribe at its end unless
// fromStart). ok false: it is gone since it was listed.
func (g *globSource) openFile(path string, cp checkpoint.Position, haveCP, fromStart bool) error {
	in := g.reader(path)
	in.fromStart = fromStart
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		g.tmpl.log.Warn("file source: a file of the glob was listed but is gone; skipping it", "file", path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("route %s: file source %s: %w", g.tmpl.route, path, err)
	}
	in.f = f
	in.nextSeq, in.fileFirst = g.nextSeq, g.nextSeq
	if err := in.start(cp, haveCP); err != nil {
		f.Close()
		return err
	}
	if g.tmpl.mode == modeSubscribe && !fromStart {
		in.fileFirst = 0 // numbered from where it is followed, as a single file
	}
	g.started(in)
	return nil
}

// started makes in the file being read.
func (g *globSource) started(in *fileSource) {
	g.cur = in
	g.reading.Store(in)
	g.seen[[2]uint64{in.id.Dev, in.id.Ino}] = true
	g.idleSince, g.idleSize = time.Now(), -1
	g.mu.Lock()
	g.segs = append(g.segs, globSeg{fileSeg: in.segs[0], path: in.path, fileFirst: in.fileFirst, listed: g.listedAt.UnixNano()})
	g.mu.Unlock()
}

// syncSegs records a file the current reader moved to by itself (a
// followed file truncated or replaced at its name).
func (g *globSource) syncSegs() {
	in := g.cur
	in.segMu.Lock()
	last := in.segs[len(in.segs)-1]
	in.segMu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.segs); n > 0 && g.segs[n-1].fileSeg == last {
		return
	}
	g.segs = append(g.segs, globSeg{fileSeg: last, path: in.path, fileFirst: in.fileFirst, listed: g.listedAt.UnixNano()})
}

// finish closes the current file, read to its end.
func (g *globSource) finish() {
	in := g.cur
	g.nextSeq = in.nextSeq
	g.doneBytes.Add(in.offset)
	g.mu.Lock()
	if n := len(g.segs); n > 0 {
		g.segs[n-1].end, g.segs[n-1].complete = in.nextSeq, true
	}
	g.mu.Unlock()
	in.Close()
	g.cur = nil
	g.reading.Store(nil)
}

// openNext opens the next listed file; false when there is none.
func (g *globSource) openNext() (bool, error) {
	if g.tmpl.mode == modeConsume {
		if err := g.relistConsume(); err != nil {
			return false, err
		}
	}
	for len(g.listed) > 0 {
		path := g.listed[0]
		g.listed = g.listed[1:]
		g.last = max(g.last, path)
		if err := g.openFile(path, checkpoint.Position{}, false, true); err != nil {
			return false, err
		}
		if g.cur != nil {
			return true, nil
		}
	}
	return false, nil
}

// relist (follow mode) adds the files that sort after every one known and
// are not one already read under another name.
func (g *globSource) relist() error {
	if time.Since(g.listedAt) < relistEvery {
		return nil
	}
	g.listedAt = time.Now()
	names, err := g.list()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("route %s: file source %s: %w", g.tmpl.route, g.written, err)
	}
	for _, n := range names {
		if n <= g.last || slices.Contains(g.listed, n) {
			continue
		}
		if id, ok := statID(n); ok && g.seen[id] {
			continue // a file read already, renamed within the glob
		}
		g.listed = append(g.listed, n)
	}
	return nil
}

// relistConsume (consume) lists the pattern again before the next file
// is opened: at most every relistEvery, and always once the files listed
// ran out. A file that appeared since and sorts after the last one
// opened is read in its place; one that sorts before it would never be
// read, and stops the route.
func (g *globSource) relistConsume() error {
	if len(g.listed) > 0 && time.Since(g.listedAt) < relistEvery {
		return nil
	}
	at := listingStart()
	names, err := g.list()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("route %s: file source %s: %w", g.tmpl.route, g.written, err)
	}
	g.listedAt = at
	for _, n := range names {
		if g.known[n] {
			continue
		}
		g.known[n] = true
		if id, ok := statID(n); ok && g.seen[id] {
			continue // a file read already, renamed within the glob
		}
		if n < g.last {
			return g.passedError(n, g.last, "appeared while the route was reading the files after it")
		}
		i, _ := slices.BinarySearch(g.listed, n)
		g.listed = slices.Insert(g.listed, i, n)
	}
	return nil
}

// checkPassed (consume, at a resume in path) refuses a file sorting
// before path that appeared or changed after the listing path was opened
// after began (listed, unix nanoseconds; 0 for a checkpoint that did not
// keep it): every file there then was read before path, so such a file,
// or what was written to it since, would never be read.
func (g *globSource) checkPassed(before []string, path string, listed int64) error {
	if listed == 0 {
		return nil
	}
	cut := time.Unix(0, listed)
	for _, n := range before {
		st, err := os.Stat(n)
		if err != nil {
			continue
		}
		if ct := changeTime(st); ct.After(cut) {
			return g.passedError(n, path, fmt.Sprintf("appeared or changed (at %s) after the route had listed the files to read %s (at %s)",
				ct.UTC().Format(time.RFC3339Nano), g.writtenPath(path), cut.UTC().Format(time.RFC3339Nano)))
		}
	}
	return nil
}

// passedError is the error of a file the route has read past in name
// order: path sorts before last.
func (g *globSource) passedError(path, last, what string) error {
	return fmt.Errorf("route %s: file source %s: %s sorts before %s, which the route has read past, and %s: a consume route reads the files in name order, so its lines would never be read. "+
		"To have it read, give it a name that sorts after %s; or, to read every file again, reset the route's state (`mqbc state reset %s %s`: an idempotent sink absorbs what it had)",
		g.tmpl.route, g.written, g.writtenPath(path), g.writtenPath(last), what, g.writtenPath(last), cmp.Or(g.tmpl.pipeline, "FILE.mqb"), g.tmpl.route)
}

func statID(path string) ([2]uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return [2]uint64{}, false
	}
	defer f.Close()
	id, _, err := identify(f)
	return [2]uint64{id.Dev, id.Ino}, err == nil
}

func (g *globSource) ResumeAt() map[int32]runtime.AckPos {
	if g.cur != nil {
		return map[int32]runtime.AckPos{0: {Next: g.cur.nextSeq, Offset: g.cur.offset}}
	}
	return map[int32]runtime.AckPos{0: {Next: g.nextSeq}}
}

func (g *globSource) Commit(context.Context, map[int32]runtime.AckPos) error { return nil }

func (g *globSource) Close() error {
	if g.cur == nil {
		return nil
	}
	return g.cur.Close()
}

// Next reads the next batch, moving through the files in name order.
func (g *globSource) Next(ctx context.Context, size int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatchArena(size, g.arenaHint)
	defer func() { g.arenaHint = min(b.PayloadBytes()+b.PayloadBytes()/8, runtime.MaxBatchBytes) }()
	defer func() {
		if in := g.cur; in != nil {
			in.bytesRead.Store(in.offset) // progress, once per batch
		}
	}()
	follow := g.tmpl.mode != modeConsume
	var payloadBytes int
	for b.Len() < size && payloadBytes < runtime.MaxBatchBytes {
		if g.cur == nil {
			ok, err := g.openNext()
			if err != nil {
				return nil, false, err
			}
			if !ok {
				if !follow {
					return b, true, nil
				}
				if b.Len() > 0 {
					break
				}
				if err := g.relist(); err != nil {
					return nil, false, err
				}
				if len(g.listed) == 0 && !g.wait(ctx) {
					return b, false, nil
				}
				continue
			}
		}
		in := g.cur
		line, tooLong, n, err := in.readLine()
		if err == io.EOF {
			if !follow {
				if len(line) > 0 || tooLong > 0 {
					in.add(b, line, tooLong, n)
				}
				if err := in.checkUnchanged(); err != nil {
					return nil, false, err
				}
				g.finish()
				continue
			}
			if b.Len() > 0 {
				break
			}
			moved, err := in.followRotation(b)
			if err != nil {
				return nil, false, err
			}
			if moved {
				g.syncSegs()
				g.idleSince, g.idleSize = time.Now(), -1
				if b.Len() > 0 {
					break
				}
				continue
			}
			if done, err := g.followedFileDone(b); err != nil {
				return nil, false, err
			} else if done {
				if b.Len() > 0 {
					break
				}
				continue
			}
			if !g.wait(ctx) {
				return b, false, nil
			}
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("route %s: read %s at byte %d: %w", g.tmpl.route, in.path, in.offset, err)
		}
		payloadBytes += len(line)
		in.add(b, line, tooLong, n)
		if follow && in.r.Buffered() == 0 && b.Len() > 0 {
			break
		}
	}
	if in := g.cur; in != nil {
		if err := in.checkUnchanged(); err != nil {
			return nil, false, err
		}
	}
	return b, false, nil
}

// followedFileDone (follow mode, at the end of the current file) moves on
// to the next file of the glob once there is one and the current file has
// not changed for rotateGrace; its unterminated last line, if any, is
// taken as its last record.
func (g *globSource) followedFileDone(b *runtime.Batch) (bool, error) {
	in := g.cur
	if st, err := in.f.Stat(); err == nil && st.Size() != g.idleSize {
		g.idleSince, g.idleSize = time.Now(), st.Size()
	}
	if err := g.relist(); err != nil {
		return false, err
	}
	if len(g.listed) == 0 || in.rotated || time.Since(g.idleSince) < rotateGrace {
		return false, nil
	}
	if len(in.partial) > 0 || in.partialLen > 0 {
		in.takePartial(b)
	}
	g.finish()
	return true, nil
}

// wait waits one poll interval; false when ctx ended first.
func (g *globSource) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(g.tmpl.poll):
		return true
	}
}

// Position names the file holding the committed position: the byte after
// its last committed record, or, when every record of it is committed and
// it was read to its end, that it is done.
func (g *globSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	c := committed[0]
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.segs) == 0 {
		if g.haveCP {
			cp := g.openCP
			return cp, true
		}
		return checkpoint.Position{Source: encodeGlobSource(g.pattern, globPos{}), Mode: g.tmpl.mode, NextIndex: c.Next, Offset: c.Offset}, true
	}
	i := 0
	for j := range g.segs {
		if g.segs[j].first <= c.Next {
			i = j
		}
	}
	seg := g.segs[i]
	if i > 0 && c.Next == seg.first && g.segs[i-1].complete && g.segs[i-1].end == c.Next {
		i--
		seg = g.segs[i]
	}
	g.segs = g.segs[i:]
	pos := checkpoint.Position{Mode: g.tmpl.mode, NextIndex: c.Next, Offset: c.Offset}
	gp := globPos{first: seg.fileFirst, file: encodeFileSource(seg.path, seg.id), listed: seg.listed}
	switch {
	case seg.complete && c.Next == seg.end:
		gp.done = true
	case c.Next == seg.first:
		pos.Offset = seg.start // nothing of this file committed yet
	}
	pos.Source = encodeGlobSource(g.pattern, gp)
	return pos, true
}

// globSourceMarker separates a glob's pattern from the position in it in
// the Source of its checkpoint: "PATTERN|mqb-glob:v1 first=F done=D
// file=FILE", FILE being a single file's Source (encodeFileSource).
const globSourceMarker = "|mqb-glob:v1 "

// globPos is where in a glob a checkpoint is.
type globPos struct {
	first uint64 // Seq of the file's first record
	done  bool   // the file was read to its end and all of it committed
	file  string // the file and its identity, as encodeFileSource writes it
	// listed is globSeg.listed of the file (0 in a checkpoint written
	// before it was kept).
	listed int64
}

func encodeGlobSource(pattern string, p globPos) string {
	if p.listed == 0 {
		return fmt.Sprintf("%s%sfirst=%d done=%t file=%s", pattern, globSourceMarker, p.first, p.done, p.file)
	}
	return fmt.Sprintf("%s%sfirst=%d done=%t listed=%d file=%s", pattern, globSourceMarker, p.first, p.done, p.listed, p.file)
}

func decodeGlobSource(source string) (pattern string, p globPos, ok bool) {
	pattern, rest, ok := strings.Cut(source, globSourceMarker)
	if !ok {
		return source, globPos{}, false
	}
	f := strings.SplitN(rest, " ", 3)
	var listed int64
	if len(f) == 3 && strings.HasPrefix(f[2], "listed=") {
		l, file, _ := strings.Cut(f[2], " ")
		n, err := strconv.ParseInt(strings.TrimPrefix(l, "listed="), 10, 64)
		if err != nil {
			return source, globPos{}, false
		}
		listed, f[2] = n, file
	}
	if len(f) != 3 || !strings.HasPrefix(f[0], "first=") || !strings.HasPrefix(f[1], "done=") || !strings.HasPrefix(f[2], "file=") {
		return source, globPos{}, false
	}
	first, err1 := strconv.ParseUint(strings.TrimPrefix(f[0], "first="), 10, 64)
	done, err2 := strconv.ParseBool(strings.TrimPrefix(f[1], "done="))
	if err1 != nil || err2 != nil {
		return source, globPos{}, false
	}
	return pattern, globPos{first: first, done: done, file: strings.TrimPrefix(f[2], "file="), listed: listed}, true
}
