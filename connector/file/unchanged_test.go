package file

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// A consume-mode file rewritten in place or truncated while it is read
// keeps its inode, and the open descriptor reads on at the old offset:
// before, the route skipped the new content's records up to that offset
// (and lost the old ones after it) and ended with exit 0. The source must
// refuse the batch it read after the change, so nothing of it is
// delivered, and say what happened.
func TestConsumeFileChangedWhileRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, path string)
		want   string
	}{
		{"rewritten in place", func(t *testing.T, path string) {
			writeExport(t, path, "second", 0, 1200) // os.WriteFile truncates, same inode
		}, "rewritten in place"},
		{"truncated below the offset", func(t *testing.T, path string) {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		}, "shorter than the"},
		{"truncated past the offset", func(t *testing.T, path string) {
			st, _ := os.Stat(path)
			if err := os.Truncate(path, st.Size()-200); err != nil {
				t.Fatal(err)
			}
		}, "when the route opened it: truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orders.jsonl")
			writeExport(t, path, "first", 0, 1000)
			s := &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: path, mode: modeConsume,
				format: "json", maxRecord: 1 << 20}
			if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			b, eof, err := s.Next(context.Background(), 100)
			if err != nil || eof || b.Len() != 100 {
				t.Fatalf("first batch: %d records, eof %v, err %v", b.Len(), eof, err)
			}
			tc.change(t, path)
			for range 20 { // the changed file is seen at the latest at its end
				b, eof, err = s.Next(context.Background(), 100)
				if err != nil || eof {
					break
				}
				for _, r := range b.Records() {
					if !strings.Contains(string(r.Payload), `"first"`) {
						t.Fatalf("a batch handed on holds another file's record: %s", r.Payload)
					}
				}
			}
			if err == nil {
				t.Fatalf("the source read the changed file to its end (eof %v) without an error", eof)
			}
			for _, want := range []string{"changed while it was read", tc.want, "mqbc state reset"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, err)
				}
			}
		})
	}
}

// Appending to a consumed file while it is read is no change: the route
// reads what is there, and its counts add up.
func TestConsumeFileAppendedWhileRead(t *testing.T) {
	d := t.TempDir()
	in, parts, state := filepath.Join(d, "orders.jsonl"), filepath.Join(d, "parts"), filepath.Join(d, "state")
	writeExport(t, in, "a", 0, 1000)
	s := &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: in, mode: modeConsume,
		format: "json", maxRecord: 1 << 20}
	if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Next(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(in, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"order_id": "a-1000", "export": "a"}` + "\n")
	f.Close()
	n := 100
	for {
		b, eof, err := s.Next(context.Background(), 100)
		if err != nil {
			t.Fatalf("an appended file: %v", err)
		}
		n += b.Len()
		if eof {
			break
		}
	}
	if n != 1001 {
		t.Errorf("read %d records, want 1001", n)
	}
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{partsRoute("load", in, parts, state)}}
	if rs := runRoute(t, p, "load"); rs.Out != 1001 {
		t.Errorf("route: out %d, want 1001", rs.Out)
	}
}

// TestCheckUnchangedAllocates: the check after every batch reads the
// file's first bytes into a buffer the source keeps and compares their
// hash without a string of its own; only the fstat's result is
// allocated. It agrees with headHash on the file as it is and as it is
// rewritten.
func TestCheckUnchangedAllocates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	writeExport(t, path, "first", 0, 1000)
	s := &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: path, mode: modeConsume,
		format: "json", maxRecord: 1 << 20}
	if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.checkUnchanged(); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := s.checkUnchanged(); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("checkUnchanged: %v allocations, want at most the fstat's one", n)
	}
	writeExport(t, path, "second", 0, 1000) // same size and inode, other first bytes
	if head, _ := headHash(s.f, s.id.HeadLen); head == s.id.Head {
		t.Fatal("the rewrite kept the first bytes")
	}
	if same, err := s.headUnchanged(); same || err != nil {
		t.Errorf("headUnchanged after a rewrite: %v, %v", same, err)
	}
	if err := s.checkUnchanged(); err == nil || !strings.Contains(err.Error(), "rewritten in place") {
		t.Errorf("checkUnchanged after a rewrite: %v", err)
	}
}
