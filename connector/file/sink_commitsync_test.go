package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSinkSyncOnCommit: a file sink told to sync on commit writes its
// lines at once, records the file's length in its sidecar only once
// Sync has made them durable, and syncs what is left when it closes; a
// torn line written after the last Sync is cut on reopen, the lines
// before it kept.
func TestSinkSyncOnCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	s, err := openTestFileSink(t, path)
	if err != nil {
		t.Fatal(err)
	}
	s.SyncOnCommit()
	ctx := context.Background()
	recorded := func() int64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.length
	}
	steps := []struct {
		do           func() error
		file         string
		wantRecorded int64
	}{
		{func() error { return s.WriteLines(ctx, [][]byte{[]byte("a\nb\n")}) }, "a\nb\n", 0},
		{s.Sync, "a\nb\n", 4},
		{s.Sync, "a\nb\n", 4}, // nothing new: nothing to do
		{func() error { return s.WriteLines(ctx, [][]byte{[]byte("c\n"), []byte("d\n")}) }, "a\nb\nc\nd\n", 4},
		{s.Sync, "a\nb\nc\nd\n", 8},
		{func() error { return s.WriteLines(ctx, [][]byte{[]byte("e\n")}) }, "a\nb\nc\nd\ne\n", 8},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if b, _ := os.ReadFile(path); string(b) != st.file {
			t.Errorf("step %d: file %q, want %q", i, b, st.file)
		}
		if got := recorded(); got != st.wantRecorded {
			t.Errorf("step %d: recorded length %d, want %d", i, got, st.wantRecorded)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := recorded(); got != 10 {
		t.Errorf("after Close: recorded length %d, want 10 (Close syncs)", got)
	}
	// A crash mid-write after the last commit: the fragment past the
	// recorded length is cut when the sink opens the file again.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("f\n{\"torn")
	f.Close()
	s2, err := openTestFileSink(t, path)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	if b, _ := os.ReadFile(path); string(b) != "a\nb\nc\nd\ne\nf\n" {
		t.Errorf("after reopening: %q, want the torn line cut and the whole ones kept", b)
	}
}

// TestSinkStartsWriteback: a sink syncing on commit starts the disk
// writing what it appended once writebackBytes have gathered since it
// last did, as one range from where that left off, whatever the writes
// that made it up; what a commit's fsync covered is not asked for again.
func TestSinkStartsWriteback(t *testing.T) {
	type span struct{ off, n int64 }
	var got []span
	defer func(w func(*os.File, int64, int64)) { writeback = w }(writeback)
	writeback = func(_ *os.File, off, n int64) { got = append(got, span{off, n}) }
	path := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(path, []byte("foreign\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := openTestFileSink(t, path)
	if err != nil {
		t.Fatal(err)
	}
	s.SyncOnCommit()
	ctx := context.Background()
	block := make([]byte, writebackBytes/4)
	for i := range block {
		block[i] = 'x'
	}
	block[len(block)-1] = '\n'
	write := func(lines ...[]byte) {
		t.Helper()
		if err := s.WriteLines(ctx, lines); err != nil {
			t.Fatal(err)
		}
	}
	q := int64(len(block))
	write([]byte("small\n"))
	write(block, block) // half of writebackBytes: not yet
	if len(got) != 0 {
		t.Fatalf("writeback of %v before writebackBytes gathered", got)
	}
	write(block)
	write(block[:q/2], block[q/2:]) // writebackBytes and the small line
	write([]byte("a\n"))
	if err := s.Sync(); err != nil { // the fsync covers "a\n"
		t.Fatal(err)
	}
	write(block, block, block, block)
	want := []span{{8, 6 + writebackBytes}, {8 + 6 + writebackBytes + 2, writebackBytes}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("writeback of %v, want %v", got, want)
	}
}
