package sql

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mqb-dev/mqb/runtime"
)

// syncBuffer is a bytes.Buffer safe for the route's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A ${payload.totl} (a field the data lacks) into a column that is not a
// key writes NULL: the run warns once per placeholder, naming it, on the
// SQLite sink and on a server one alike (bindParams is shared). A field
// present as null is the data's own NULL: no warning.
func TestAbsentFieldWarnsOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field string
		warn  bool
	}{
		{"misspelt field", "totl", true},
		{"field present, sometimes null", "total", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var in strings.Builder
			for i := range 50 {
				total := fmt.Sprint(i)
				if i%7 == 0 {
					total = "null"
				}
				fmt.Fprintf(&in, `{"id":"o%02d","total":%s}`+"\n", i, total)
			}
			if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(in.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			p := compileMQB(t, fmt.Sprintf(`route r {
  from file { path = "in.jsonl" }
  to sql {
    url          = "sqlite://out.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, total INTEGER)"
    insert_query = "INSERT INTO t (id, total) VALUES (${payload.id}, ${payload.%s}) ON CONFLICT (id) DO NOTHING"
  }
}`, tc.field))
			var logs syncBuffer
			opts := runtime.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})), BaseDir: dir, StateDir: filepath.Join(dir, "state")}
			st, err := runtime.Run(context.Background(), p, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Route("r").Out; got != 50 {
				t.Errorf("out %d, want 50", got)
			}
			n := strings.Count(logs.String(), "names a field the record does not have")
			switch {
			case tc.warn && n != 1:
				t.Errorf("%d warnings, want one:\n%s", n, logs.String())
			case tc.warn && !strings.Contains(logs.String(), "${payload.totl}"):
				t.Errorf("the warning does not name the placeholder:\n%s", logs.String())
			case !tc.warn && n != 0:
				t.Errorf("warned about a field that is there:\n%s", logs.String())
			}
		})
	}
}
