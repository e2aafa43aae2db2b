package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"
)

// A file source whose path is a named pipe is refused at once, in every
// mode. It used to open the pipe, and opening a pipe blocks in the system
// call until a writer opens it, where no drain reaches: the route hung
// before reading, and SIGTERM did not end mqbc run. (With a writer it
// failed anyway: a pipe cannot seek, and two routes split its lines.)
func TestFileSourceRefusesNamedPipe(t *testing.T) {
	d := t.TempDir()
	in := filepath.Join(d, "in.jsonl")
	if err := syscall.Mkfifo(in, 0o600); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	// Whatever open is left blocked when the test ends is let go by a
	// writer, so that the test binary does not hang on it.
	defer func() {
		if f, err := os.OpenFile(in, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}()
	for _, mode := range []string{modeConsume, modeSubscribe, modeGroupSubscribe} {
		p := fileRoute("pipe", in, filepath.Join(d, mode+".jsonl"), "", filepath.Join(d, "state-"+mode))
		p.Routes[0].Nodes[0].Attrs["mode"] = enumV(mode)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := runtime.Run(ctx, p, testOptions(t))
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Second):
			cancel() // a drain, as SIGTERM does
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("mode %s: a route reading a named pipe did not end, not even 5 s after it was drained", mode)
			}
		}
		cancel()
		if err == nil || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), in) {
			t.Errorf("mode %s: a route reading a named pipe ended with %v, want an error naming the pipe", mode, err)
		}
	}
}
