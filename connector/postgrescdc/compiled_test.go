package postgrescdc

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
)

// connect opens a connection to url, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// startCompiled compiles src, a .mqb file, and starts it in a directory
// of its own, its state there too; logs, when set, gets the warnings. It
// returns the directory and the run.
func startCompiled(t *testing.T, src string, logs *runtest.Logs) (string, *runtest.Background) {
	t.Helper()
	dir := t.TempDir()
	p := plantest.Compile(t, src)
	opts := runtest.Options()
	if logs != nil {
		opts = logs.Options()
	}
	opts.BaseDir, opts.StateDir = dir, filepath.Join(dir, "state")
	return dir, runtest.Start(context.Background(), p, opts)
}

// waitUntil polls done every 50 ms, for 30 s at most.
func waitUntil(done func() bool) {
	for deadline := time.Now().Add(30 * time.Second); !done() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}
