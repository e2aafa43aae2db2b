package runtime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// File source modes.
const (
	modeConsume        = "consume"
	modeSubscribe      = "subscribe"
	modeGroupSubscribe = "group_subscribe"
)

// maxBatchBytes closes a batch early once its payloads reach this size, so a
// batch of long lines stays bounded whatever batch_size says.
const maxBatchBytes = 8 << 20

// dlqSnippetBytes is how much of an over-long line is kept for the DLQ.
const dlqSnippetBytes = 1024

// fileSource reads one record per line.
type fileSource struct {
	route     string
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
	// arenaHint sizes the next batch's payload arena from the last one, so
	// it is allocated once instead of grown (and copied) by doubling.
	arenaHint int

	size      atomic.Int64 // file size at open (consume), for progress
	bytesRead atomic.Int64
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// sourceName is the file's base name without extension, safe in a part name.
func (s *fileSource) sourceName() string {
	base := filepath.Base(s.path)
	if ext := filepath.Ext(base); ext != "" && ext != base {
		base = strings.TrimSuffix(base, ext)
	}
	base = unsafeName.ReplaceAllString(base, "_")
	base = strings.ReplaceAll(base, "-", "_") // '-' separates the numbers in a part name
	if base == "" {
		base = "file"
	}
	return base
}

// replayable reports whether positions repeat across runs (consume mode).
func (s *fileSource) replayable() bool { return s.mode == modeConsume }

func (s *fileSource) recordFormat() string { return s.format }

func (s *fileSource) seqGaps() bool { return false }

func (s *fileSource) progress() (read, size int64, ok bool) {
	size = s.size.Load()
	return s.bytesRead.Load(), size, size > 0 && s.mode == modeConsume
}

// position is the file's one partition: the next record index and the byte
// offset it starts at.
func (s *fileSource) position(committed map[int32]ackPos) (checkpoint.Position, bool) {
	c := committed[0]
	return checkpoint.Position{Source: s.path, Mode: s.mode, NextIndex: c.next, Offset: c.offset}, true
}

// commit has nothing to do: the checkpoint store holds the position.
func (s *fileSource) commit(context.Context, map[int32]ackPos) error { return nil }

// open positions the source: consume resumes after the committed record
// index, group_subscribe at the committed byte offset, subscribe at the end.
// Its one partition, 0, starts being tracked at the resumed record index.
func (s *fileSource) open(ctx context.Context, cp checkpoint.Position, haveCP bool, host sourceHost) error {
	if err := s.openFile(ctx, cp, haveCP); err != nil || s.f == nil {
		return err
	}
	if haveCP && s.offset > 0 {
		s.log.Info("resuming from checkpoint", "next_index", s.nextSeq, "offset", s.offset)
	}
	return nil
}

func (s *fileSource) resumeAt() map[int32]ackPos {
	return map[int32]ackPos{0: {next: s.nextSeq, offset: s.offset}}
}

func (s *fileSource) openFile(ctx context.Context, cp checkpoint.Position, haveCP bool) error {
	for {
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
	st, err := s.f.Stat()
	if err != nil {
		return fmt.Errorf("route %s: file source: %w", s.route, err)
	}
	s.size.Store(st.Size())
	switch s.mode {
	case modeConsume:
		if haveCP && cp.Source == s.path && cp.Mode == modeConsume {
			s.offset, s.nextSeq = cp.Offset, cp.NextIndex
		}
	case modeGroupSubscribe:
		if haveCP && cp.Source == s.path && cp.Mode == modeGroupSubscribe {
			s.offset = cp.Offset
		}
	case modeSubscribe:
		s.offset = st.Size()
	default:
		return fmt.Errorf("route %s: file source attribute mode: unknown mode %q", s.route, s.mode)
	}
	if s.offset > st.Size() {
		return fmt.Errorf("route %s: file source %s: checkpoint offset %d is past the end of the file (%d bytes): was the file replaced? remove the checkpoint to start over", s.route, s.path, s.offset, st.Size())
	}
	if _, err := s.f.Seek(s.offset, io.SeekStart); err != nil {
		return fmt.Errorf("route %s: file source: seek: %w", s.route, err)
	}
	s.bytesRead.Store(s.offset)
	s.r = bufio.NewReaderSize(s.f, 1<<20)
	return nil
}

func (s *fileSource) close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}

// next reads the next batch. eof is true when a consume-mode source has
// reached the end of the file; follow modes never end (they return an empty
// batch when ctx is done).
func (s *fileSource) next(ctx context.Context, size int) (b *batch, eof bool, err error) {
	b = &batch{recs: make([]Record, 0, size), arena: make([]byte, 0, s.arenaHint)}
	var payloadBytes int
	for len(b.recs) < size && payloadBytes < maxBatchBytes {
		line, tooLong, n, err := s.readLine()
		if err == io.EOF {
			if s.mode == modeConsume {
				if len(line) > 0 || tooLong > 0 { // a last line without newline
					s.add(b, line, tooLong, n)
				}
				return b, true, nil
			}
			if len(b.recs) > 0 {
				break // hand over what we have; wait for more next time
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
		payloadBytes += len(line)
		s.add(b, line, tooLong, n)
		if s.mode != modeConsume && s.r.Buffered() == 0 && len(b.recs) > 0 {
			break // following a live file: do not wait to fill a batch
		}
	}
	s.arenaHint = min(len(b.arena)+len(b.arena)/8, maxBatchBytes)
	return b, false, nil
}

// add appends a record for line (n bytes of file consumed). Blank lines are
// skipped without taking an index, which keeps numbering deterministic.
func (s *fileSource) add(b *batch, line []byte, tooLong, n int) {
	s.offset += int64(n)
	s.bytesRead.Store(s.offset)
	if tooLong == 0 && len(bytes.TrimSpace(line)) == 0 {
		return
	}
	start := len(b.arena)
	b.arena = append(b.arena, line...)
	rec := Record{
		Payload: b.arena[start:len(b.arena):len(b.arena)],
		Seq:     s.nextSeq,
		Next:    s.offset,
	}
	if tooLong > 0 {
		rec.kill(fmt.Sprintf("record of %d bytes exceeds max_record_bytes = %d (payload truncated to %d bytes)", tooLong, s.maxRecord, len(line)))
	}
	s.nextSeq++
	b.recs = append(b.recs, rec)
}

// readLine returns the next line without its line ending and the number
// of bytes it took in the file. A line longer than max_record_bytes is read
// through to its newline without keeping more than a snippet: tooLong is
// then its full length. At the end of a follow-mode file an unterminated
// line is kept in s.partial and io.EOF returned.
func (s *fileSource) readLine() (line []byte, tooLong, n int, err error) {
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
				keep := min(dlqSnippetBytes, len(s.scratch)+len(chunk))
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
			content := bytes.TrimRight(line, "\r\n")
			if over || len(content) > s.maxRecord {
				return truncate(content), max(total-1, len(content)), total, nil
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
				return truncate(content), total, total, io.EOF
			}
			return content, 0, total, io.EOF
		default:
			return nil, 0, 0, err
		}
	}
}

func truncate(b []byte) []byte {
	if len(b) > dlqSnippetBytes {
		return b[:dlqSnippetBytes]
	}
	return b
}
