package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
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
	registerSink("stdout", func(b *buildEnv, _ *stdoutConfig) (sink, []*program, error) {
		return &stdoutSink{route: b.rt.name, envelope: b.dlq, out: os.Stdout}, nil, nil
	})
}

func (s *stdoutSink) Write(_ context.Context, recs []*Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	buf := appendLines(s.buf[:0], recs, s.envelope)
	s.buf = buf
	if _, err := s.out.Write(buf); err != nil {
		return fmt.Errorf("route %s: stdout: %w", s.route, err)
	}
	return nil
}

func (s *stdoutSink) Close() error { return nil }
