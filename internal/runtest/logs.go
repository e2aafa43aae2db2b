package runtest

import (
	"bytes"
	"log/slog"
	"sync"

	"github.com/mqb-dev/mqb/runtime"
)

// Logs keeps a run's log lines, for a test that reads what the route
// said; the route's goroutines write it at once.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Options are run options that log warnings and errors to l, as text.
func (l *Logs) Options() runtime.Options {
	return runtime.Options{Logger: slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}
