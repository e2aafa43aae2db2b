package runtime

import (
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
