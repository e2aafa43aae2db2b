package runtime

import (
	"bytes"
	"strings"
	"testing"
)

// TestAddLines: the lines AddLines takes are those readLine would give as
// they are, their records numbered and placed as AddCopy places them, and
// it stops before the first line the source must read its own way.
func TestAddLines(t *testing.T) {
	cases := []struct {
		name           string
		data           string
		max, maxBytes  int
		want           []string
		wantUsed       int
		wantArenaLines string
	}{
		{"whole lines", "a\nbb\nccc\n", 10, 100, []string{"a", "bb", "ccc"}, 9, "a\nbb\nccc\n"},
		{"no newline at the end", "a\nbb", 10, 100, []string{"a"}, 2, "a\n"},
		{"carriage return", "a\nb\r\nc\n", 10, 100, []string{"a"}, 2, "a\n"},
		{"blank line", "a\n\nc\n", 10, 100, []string{"a"}, 2, "a\n"},
		{"leading space", "a\n  b\n", 10, 100, []string{"a"}, 2, "a\n"},
		{"too long", "a\n" + strings.Repeat("x", 9) + "\nb\n", 10, 100, []string{"a"}, 2, "a\n"},
		{"at most max", "a\nb\nc\n", 2, 100, []string{"a", "b"}, 4, "a\nb\n"},
		{"at most maxBytes", "a\nb\nc\n", 10, 5, []string{"a", "b"}, 4, "a\nb\n"},
		{"nothing to take", "\na\n", 10, 100, nil, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBatch(4)
			b.AddCopy(Record{Seq: 6, Next: 100}, []byte("before"))
			n, used := b.AddLines([]byte(c.data), c.max, c.maxBytes, 8, 7, 100)
			if n != len(c.want) || used != c.wantUsed {
				t.Fatalf("took %d records, %d bytes; want %d, %d", n, used, len(c.want), c.wantUsed)
			}
			if got := string(b.arena); got != "before\n"+c.wantArenaLines {
				t.Errorf("arena %q, want %q", got, "before\n"+c.wantArenaLines)
			}
			if b.copied != len(b.recs) {
				t.Errorf("copied %d of %d records", b.copied, len(b.recs))
			}
			off := int64(100)
			for i, w := range c.want {
				r := b.recs[1+i]
				off += int64(len(w) + 1)
				if string(r.Payload) != w || r.Seq != uint64(7+i) || r.Next != off {
					t.Errorf("record %d: %q seq %d next %d; want %q seq %d next %d", i, r.Payload, r.Seq, r.Next, w, 7+i, off)
				}
				if cap(r.Payload) != len(r.Payload) {
					t.Errorf("record %d: payload has room past its end (%d > %d): an append would overwrite the arena", i, cap(r.Payload), len(r.Payload))
				}
			}
			lines, ok := groupLines([]*batch{b}, nil)
			if !ok || string(lines[0]) != string(b.arena) {
				t.Errorf("groupLines: %q, %v; want the arena as one run", lines, ok)
			}
		})
	}
}

// TestAddBlock: AddBlock takes the lines AddLines would take (the same
// stops), whole into the arena with no record each, and a block grown by
// two calls is one run of positions: the first line's Seq, the offset
// after the last. groupLines hands the sink the arena as it is.
func TestAddBlock(t *testing.T) {
	cases := []struct {
		name     string
		data     string
		maxBytes int
	}{
		{"whole lines", "a\nbb\nccc\n", 100},
		{"no newline at the end", "a\nbb", 100},
		{"carriage return", "a\nb\r\nc\n", 100},
		{"blank line", "a\n\nc\n", 100},
		{"leading space", "a\n  b\n", 100},
		{"too long", "a\n" + strings.Repeat("x", 9) + "\nb\n", 100},
		{"at most maxBytes", "a\nb\nc\n", 5},
		{"nothing to take", "\na\n", 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lb := NewBatch(4)
			wantN, wantUsed := lb.AddLines([]byte(c.data), 1<<20, c.maxBytes, 8, 7, 100)
			b := NewBatchArena(0, 64)
			n, used := b.AddBlock([]byte(c.data), c.maxBytes, 8, 7, 100)
			if n != wantN || used != wantUsed {
				t.Fatalf("took %d lines, %d bytes; AddLines took %d, %d", n, used, wantN, wantUsed)
			}
			if string(b.arena) != string(lb.arena) || len(b.recs) != 0 || b.BlockLines() != n {
				t.Errorf("arena %q, %d records, %d block lines; want %q, none, %d", b.arena, len(b.recs), b.BlockLines(), lb.arena, n)
			}
			if n > 0 && (b.blockFirst != 7 || b.blockNext != 100+int64(used)) {
				t.Errorf("block from %d to offset %d, want from 7 to %d", b.blockFirst, b.blockNext, 100+used)
			}
			lines, ok := groupLines([]*batch{b}, nil)
			if !ok || string(bytes.Join(lines, nil)) != string(lb.arena) {
				t.Errorf("groupLines: %q, %v; want %q", lines, ok, lb.arena)
			}
		})
	}
	b := NewBatchArena(0, 64)
	b.AddBlock([]byte("a\nb\n"), 100, 8, 3, 40)
	b.AddBlock([]byte("cc\n"), 100, 8, 5, 44)
	if b.BlockLines() != 3 || b.blockFirst != 3 || b.blockNext != 47 || string(b.arena) != "a\nb\ncc\n" {
		t.Errorf("two calls: %d lines from %d to offset %d, arena %q; want 3 from 3 to 47", b.BlockLines(), b.blockFirst, b.blockNext, b.arena)
	}
}
