package file

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// readAll reads path to its end with a consume-mode text source, asking
// for blocks or not, and returns each line the batches hold with its
// record index (a dead-lettered one marked), and the positions after
// each batch.
func readAll(t *testing.T, path string, blocks bool, maxRecord int) (lines []string, ends [][2]int64, inBlocks int, s *fileSource) {
	t.Helper()
	s = &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: path, mode: modeConsume,
		format: "text", maxRecord: maxRecord}
	if blocks {
		s.PassBlocks()
	}
	if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	seq := uint64(0)
	for {
		b, eof, err := s.Next(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if blk := b.Block(); blk != nil {
			if !blocks || b.Len() != 0 {
				t.Fatalf("a block (blocks %v) with %d records", blocks, b.Len())
			}
			ls := strings.SplitAfter(string(blk), "\n")
			ls = ls[:len(ls)-1]
			if len(ls) != b.BlockLines() {
				t.Fatalf("a block of %d lines counts %d", len(ls), b.BlockLines())
			}
			inBlocks += len(ls)
			for _, l := range ls {
				lines = append(lines, fmt.Sprintf("%d %s", seq, strings.TrimSuffix(l, "\n")))
				seq++
			}
		}
		for _, r := range b.Records() {
			if r.Seq != seq {
				t.Fatalf("record %d after %d lines", r.Seq, seq)
			}
			mark := ""
			if r.DeadLettered() != "" {
				mark = "dead "
			}
			lines = append(lines, fmt.Sprintf("%d %s%s", seq, mark, r.Payload))
			seq++
			ends = append(ends, [2]int64{int64(seq), r.Next})
		}
		if b.Block() != nil {
			ends = append(ends, [2]int64{int64(s.nextSeq), s.offset})
		}
		if eof {
			return lines, ends, inBlocks, s
		}
	}
}

// TestBlocksReadAsRecords: a source handing the route blocks gives the
// same lines, numbered the same, as one giving records: blank lines,
// carriage returns, leading white space, a line longer than the read
// buffer, one too long (dead-lettered) and an unterminated last line go as
// records between the blocks; each block ends at a position a record
// would have ended at, and the source ends at the same one.
func TestBlocksReadAsRecords(t *testing.T) {
	var in strings.Builder
	for i := range 60000 {
		switch {
		case i%7001 == 3:
			in.WriteString("\n")
		case i%9001 == 4:
			in.WriteString(" \t \n")
		case i%11003 == 5:
			fmt.Fprintf(&in, "crlf %d\r\n", i)
		case i%13007 == 6:
			fmt.Fprintf(&in, "  indented %d\n", i)
		case i == 20000:
			in.WriteString(strings.Repeat("l", readBufferBytes+100) + "\n")
		case i == 30000:
			in.WriteString(strings.Repeat("x", 600<<10) + "\n") // over maxRecord
		default:
			fmt.Fprintf(&in, `{"order_id": "o-%d", "body": "order number %d"}`+"\n", i, i)
		}
	}
	in.WriteString("no newline at the end")
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const maxRecord = 512 << 10
	want, recEnds, _, rs := readAll(t, path, false, maxRecord)
	got, blockEnds, inBlocks, bs := readAll(t, path, true, maxRecord)
	if len(got) != len(want) {
		t.Fatalf("blocks: %d lines, records: %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: blocks %.80q, records %.80q", i, got[i], want[i])
		}
	}
	if bs.nextSeq != rs.nextSeq || bs.offset != rs.offset || bs.offset != int64(in.Len()) {
		t.Errorf("blocks end at record %d byte %d, records at %d byte %d (file %d bytes)", bs.nextSeq, bs.offset, rs.nextSeq, rs.offset, in.Len())
	}
	at := map[[2]int64]bool{}
	for _, e := range recEnds {
		at[e] = true
	}
	for _, e := range blockEnds {
		if !at[e] {
			t.Errorf("a batch ends at record %d byte %d, where no record ends", e[0], e[1])
		}
	}
	if inBlocks < len(got)*9/10 {
		t.Errorf("%d of %d lines in blocks", inBlocks, len(got))
	}
	var dead int
	for _, l := range got {
		if bytes.Contains([]byte(l), []byte(" dead ")) {
			dead++
		}
	}
	if dead != 1 {
		t.Errorf("%d dead-lettered lines, want the one too long", dead)
	}
}

// TestBlocksFileChangedWhileRead: a file rewritten in place while a
// source hands blocks is refused as with records, and no block handed on
// holds the other file's lines.
func TestBlocksFileChangedWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	writeExport(t, path, "first", 0, 30000)
	s := &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: path, mode: modeConsume,
		format: "text", maxRecord: 1 << 20}
	s.PassBlocks()
	if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, eof, err := s.Next(context.Background(), 100)
	if err != nil || eof || b.BlockLines() == 0 {
		t.Fatalf("first batch: %d lines in a block, eof %v, err %v", b.BlockLines(), eof, err)
	}
	writeExport(t, path, "second", 0, 30000)
	for range 20 {
		b, eof, err = s.Next(context.Background(), 100)
		if err != nil || eof {
			break
		}
		if bytes.Contains(b.Block(), []byte(`"second"`)) {
			t.Fatal("a block handed on holds another file's lines")
		}
	}
	if err == nil || !strings.Contains(err.Error(), "rewritten in place") {
		t.Fatalf("eof %v, err %v; want the rewrite refused", eof, err)
	}
}

// TestBlocksStaySmall: a file → file route holds about eight blocks at
// once (one being read, two queued to the worker, two queued to the sink,
// a group of two being written), every byte of them read into, so the
// block's size is most of what the route adds to the process's memory
// past the binary's own pages (issue #16: peak RSS of a file → file
// route ≤ 40 MiB; 512 KiB blocks left it at 40.7 MiB, 256 KiB at 38.9).
// Each block of a long file of short lines keeps within 320 KiB of
// arena, and the blocks are still big enough that a write and an ack
// cover thousands of lines.
func TestBlocksStaySmall(t *testing.T) {
	var in strings.Builder
	for i := range 100000 {
		fmt.Fprintf(&in, `{"order_id": "o-%d", "body": "order number %d"}`+"\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: path, mode: modeConsume,
		format: "text", maxRecord: 1 << 20}
	s.PassBlocks()
	if err := s.openFile(context.Background(), checkpoint.Position{}, false); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var blocks, biggest int
	for {
		b, eof, err := s.Next(context.Background(), 100)
		if err != nil {
			t.Fatal(err)
		}
		if blk := b.Block(); blk != nil {
			blocks++
			if cap(blk) > 320<<10 {
				t.Fatalf("block %d: %d bytes of arena (%d of lines), want at most 320 KiB", blocks, cap(blk), len(blk))
			}
			biggest = max(biggest, b.BlockLines())
		}
		if eof {
			break
		}
	}
	if blocks == 0 || biggest < 2000 {
		t.Errorf("%d blocks, the biggest of %d lines: want blocks of thousands of lines", blocks, biggest)
	}
}
