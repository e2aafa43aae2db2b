package stdio

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/mqb-dev/mqb/runtime"
)

// stdoutSink writes each record as a line on the process's standard
// output, one write per batch; as a DLQ's target, each record with its
// reason (the file sink's envelope). A replay writes a line again.
type stdoutSink struct {
	route    string
	envelope bool
	out      io.Writer

	mu  sync.Mutex
	buf []byte
}

type stdoutConfig struct{}

func init() {
	runtime.RegisterSink("stdout", func(b *runtime.BuildEnv, _ *stdoutConfig) (runtime.Sink, []*runtime.Program, error) {
		return &stdoutSink{route: b.Route(), envelope: b.DeadLetterTarget(), out: os.Stdout}, nil, nil
	})
}

func (s *stdoutSink) Write(_ context.Context, recs []*runtime.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := runtime.AppendLines(s.buf[:0], recs, s.envelope)
	s.buf = buf
	if _, err := s.out.Write(buf); err != nil {
		return fmt.Errorf("route %s: stdout: %w", s.route, err)
	}
	return nil
}

// WritesLines: the sink writes bare payload lines, except as a DLQ's
// target (envelopes).
func (s *stdoutSink) WritesLines() bool { return !s.envelope }

// WriteLines writes lines, the lines of batches as their source read them
// (see runtime.LineSink), as Write writes its records' lines.
func (s *stdoutSink) WriteLines(_ context.Context, lines [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, buf := range lines {
		if _, err := s.out.Write(buf); err != nil {
			return fmt.Errorf("route %s: stdout: %w", s.route, err)
		}
	}
	return nil
}

func (s *stdoutSink) Close() error { return nil }
