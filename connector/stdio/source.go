package stdio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// stdinSource reads the process's standard input, one record per line. A
// pipe cannot be read again, so it keeps no checkpoint and names no parts:
// the compiler calls a route over it at-most-once. A goroutine reads, so
// that a drain is not held up by a read waiting on a quiet pipe.
type stdinSource struct {
	route     string
	format    string
	maxRecord int
	in        io.Reader

	lines chan stdinLine
	errs  chan error
	seq   uint64
}

type stdinLine struct {
	data    []byte
	tooLong int // the full length of a line past max_record_bytes, else 0
}

type stdinConfig struct {
	Format         string `attr:"format"`
	MaxRecordBytes int64  `attr:"max_record_bytes"`
}

func init() {
	runtime.RegisterSource("stdin", func(b *runtime.BuildEnv, cfg *stdinConfig) (runtime.Source, error) {
		if cfg.MaxRecordBytes <= 0 {
			return nil, b.Errorf("max_record_bytes", "must be positive")
		}
		return &stdinSource{route: b.Route(), format: cfg.Format, maxRecord: int(cfg.MaxRecordBytes), in: os.Stdin}, nil
	})
}

func (s *stdinSource) Name() string         { return "stdin" }
func (s *stdinSource) Replayable() bool     { return false }
func (s *stdinSource) RecordFormat() string { return s.format }
func (s *stdinSource) SeqGaps() bool        { return false }

// Finite: stdin ends; a drain before its end is an interrupted run (what
// was read is delivered, the rest of the input is not read).
func (s *stdinSource) Finite() bool { return true }

// Position: nothing to keep; a rerun reads whatever its stdin holds.
func (s *stdinSource) Position(map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	return checkpoint.Position{}, false
}

func (s *stdinSource) Commit(context.Context, map[int32]runtime.AckPos) error { return nil }
func (s *stdinSource) Close() error                                           { return nil }

func (s *stdinSource) Open(context.Context, checkpoint.Position, bool, runtime.SourceHost) error {
	s.lines = make(chan stdinLine, 1024)
	s.errs = make(chan error, 1)
	go s.read()
	return nil
}

// read sends every line, then closes lines at the end of the input.
func (s *stdinSource) read() {
	defer close(s.lines)
	r := bufio.NewReaderSize(s.in, 64<<10)
	var line []byte
	total, first := 0, true
	for {
		chunk, err := r.ReadSlice('\n')
		total += len(chunk)
		if room := s.maxRecord + 2 - len(line); room > 0 { // +2: the line ending is not part of the record
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && err != io.EOF {
			s.errs <- fmt.Errorf("route %s: stdin: %w", s.route, err)
			return
		}
		if total > 0 {
			content := bytes.TrimRight(line, "\r\n")
			if first {
				content = runtime.TrimByteOrderMark(content, s.format)
			}
			first = false
			full := total // the line's length without its line ending
			if n := len(chunk); n > 0 && chunk[n-1] == '\n' {
				full--
				if n > 1 && chunk[n-2] == '\r' {
					full--
				}
			}
			l := stdinLine{data: content}
			if full > s.maxRecord {
				l.data, l.tooLong = runtime.Snippet(content), full
			}
			if l.tooLong > 0 || len(bytes.TrimSpace(l.data)) > 0 {
				s.lines <- l
			}
		}
		if err == io.EOF {
			return
		}
		line, total = nil, 0
	}
}

func (s *stdinSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	b := runtime.NewBatch(min(max, 256))
	select {
	case <-ctx.Done():
		return b, false, nil
	case err := <-s.errs:
		return nil, false, err
	case l, ok := <-s.lines:
		if !ok {
			return b, true, nil
		}
		s.add(b, l)
	}
	closed := runtime.Fill(ctx, b, max, s.lines, func(l stdinLine) { s.add(b, l) })
	return b, closed, nil
}

func (s *stdinSource) add(b *runtime.Batch, l stdinLine) {
	r := runtime.Record{Payload: l.data, Seq: s.seq, Next: int64(s.seq + 1)}
	s.seq++
	if l.tooLong > 0 {
		r.DeadLetter(fmt.Sprintf("record of %d bytes exceeds max_record_bytes = %d (payload truncated to %d bytes)", l.tooLong, s.maxRecord, len(l.data)))
	}
	b.Add(r)
}
