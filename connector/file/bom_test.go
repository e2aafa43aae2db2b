package file

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// readFormat reads path to its end with a consume-mode source of format,
// asking for blocks or not, and returns every line it hands over (from
// blocks and records alike) and the offset it ends at.
func readFormat(t *testing.T, path, format string, blocks bool) (lines []string, end int64) {
	t.Helper()
	s := &fileSource{route: "bom", log: slog.New(slog.DiscardHandler), path: path, mode: modeConsume,
		format: format, maxRecord: 1 << 20}
	if blocks {
		s.PassBlocks()
	}
	if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		b, eof, err := s.Next(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if blk := b.Block(); blk != nil {
			lines = append(lines, strings.Split(strings.TrimSuffix(string(blk), "\n"), "\n")...)
		}
		for _, r := range b.Records() {
			lines = append(lines, string(r.Payload))
		}
		if eof {
			return lines, s.offset
		}
	}
}

// TestByteOrderMark: a UTF-8 byte-order mark at the start of a file is
// not part of its first line for a json or text source, on the record
// path and the block path alike, and the positions still count the
// file's bytes; a raw source keeps it, and a mark anywhere else is the
// line's own content.
func TestByteOrderMark(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	// Enough lines that the block path moves blocks after the first.
	var many strings.Builder
	for i := range 5000 {
		many.WriteString(`{"n":` + strings.Repeat("1", 1+i%7) + "}\n")
	}
	for _, tc := range []struct {
		name, format, in string
		first            string // the first line handed over
		n                int    // how many lines
	}{
		{"json", "json", bom + `{"a":1}` + "\n" + `{"a":2}` + "\n", `{"a":1}`, 2},
		{"text", "text", bom + "first\nsecond\n", "first", 2},
		{"crlf", "json", bom + `{"a":1}` + "\r\n" + `{"a":2}` + "\r\n", `{"a":1}`, 2},
		{"no newline", "json", bom + `{"a":1}`, `{"a":1}`, 1},
		{"mark then blank line", "text", bom + "\nsecond\n", "second", 1},
		{"only the mark", "json", bom, "", 0},
		{"many", "json", bom + many.String(), `{"n":1}`, 5000},
		{"raw keeps it", "raw", bom + "first\n", bom + "first", 1},
		{"not at the start", "text", "first\n" + bom + "second\n", "first", 2},
		{"half a mark", "text", "\xef\xbbfirst\n", "\xef\xbbfirst", 1},
	} {
		for _, blocks := range []bool{false, true} {
			path := filepath.Join(t.TempDir(), "in")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			lines, end := readFormat(t, path, tc.format, blocks)
			if len(lines) != tc.n || (tc.n > 0 && lines[0] != tc.first) {
				t.Errorf("%s (blocks %v): %d lines, first %q; want %d, first %q", tc.name, blocks, len(lines), lines[:min(len(lines), 2)], tc.n, tc.first)
			}
			if tc.name == "not at the start" && len(lines) == 2 && lines[1] != bom+"second" {
				t.Errorf("%s (blocks %v): second line %q, want the mark kept", tc.name, blocks, lines[1])
			}
			if end != int64(len(tc.in)) {
				t.Errorf("%s (blocks %v): ends at byte %d of %d", tc.name, blocks, end, len(tc.in))
			}
		}
	}
}

// TestByteOrderMarkInPieces: a subscribe-mode source that reads a file
// from its start while its writer has written only part of the mark
// still drops the whole mark once the line is complete.
func TestByteOrderMarkInPieces(t *testing.T) {
	d := t.TempDir()
	in, out := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl")
	appendFile(t, in, "")
	p := fileRoute("follow", in, out, "", filepath.Join(d, "state"))
	p.Routes[0].Nodes[0].Attrs["mode"] = enumV(modeGroupSubscribe)
	r := startRun(context.Background(), p, testOptions(t))
	time.Sleep(300 * time.Millisecond)
	appendFile(t, in, "\xef\xbb")
	time.Sleep(250 * time.Millisecond)
	appendFile(t, in, "\xbf"+`{"a": 1}`)
	time.Sleep(250 * time.Millisecond)
	appendFile(t, in, "\n"+`{"a": 2}`+"\n")
	got := waitLines(t, out, 2)
	r.Stop(t)
	if got[0] != `{"a": 1}` || got[1] != `{"a": 2}` {
		t.Errorf("got %q", got)
	}
}
