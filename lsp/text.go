package lsp

import (
	"sort"
	"unicode/utf8"

	"go.lsp.dev/protocol"

	"github.com/mqb-dev/mqb/diag"
)

// text is a document's content with an index of its line starts, for
// converting between byte offsets and LSP positions.
type text struct {
	src   []byte
	lines []int // byte offset of the start of each line
}

func newText(src []byte) text {
	lines := []int{0}
	for i, c := range src {
		if c == '\n' {
			lines = append(lines, i+1)
		}
	}
	return text{src: src, lines: lines}
}

// lineEnd returns the offset of the end of line i, before its "\n" (a "\r"
// before it counts as part of the line, as it does for the lexer).
func (t text) lineEnd(i int) int {
	if i+1 < len(t.lines) {
		return t.lines[i+1] - 1
	}
	return len(t.src)
}

// offset converts an LSP position to a byte offset, clamped to the line.
func (t text) offset(p protocol.Position) int {
	line := int(p.Line)
	if line >= len(t.lines) {
		return len(t.src)
	}
	off, end := t.lines[line], t.lineEnd(line)
	for units := uint32(0); off < end && units < p.Character; {
		r, n := utf8.DecodeRune(t.src[off:end])
		units += utf16Len(r)
		off += n
	}
	return off
}

// position converts a byte offset to an LSP position. An offset inside a
// multi-byte character maps to the start of that character.
func (t text) position(off int) protocol.Position {
	off = min(max(off, 0), len(t.src))
	line := sort.SearchInts(t.lines, off+1) - 1
	var units uint32
	for i := t.lines[line]; i < off; {
		r, n := utf8.DecodeRune(t.src[i:])
		if i+n > off {
			break
		}
		units += utf16Len(r)
		i += n
	}
	return protocol.Position{Line: uint32(line), Character: units}
}

// diagPosition converts a diag position. The byte offset is exact; the
// column is used only when the offset does not fall on the position's line
// (a position built without one).
func (t text) diagPosition(p diag.Pos) protocol.Position {
	if p.Line < 1 || p.Line > len(t.lines) {
		return t.position(p.Offset)
	}
	start, end := t.lines[p.Line-1], t.lineEnd(p.Line-1)
	if p.Offset >= start && p.Offset <= end {
		return t.position(p.Offset)
	}
	return t.position(min(start+max(p.Col-1, 0), end))
}

// diagRange converts a diag range; an end before the start collapses to it.
// Whitespace at the end of the range is left out: node ranges from the
// parser can end where the next token starts, and a squiggle under the
// blanks after a name only blurs which word is meant.
func (t text) diagRange(r diag.Range) protocol.Range {
	start := t.diagPosition(r.Start)
	end := start
	if r.End.IsValid() && r.End.Offset >= r.Start.Offset {
		end = t.diagPosition(r.End)
		if r.Start.Offset >= 0 && r.End.Offset <= len(t.src) {
			e := r.End.Offset
			for e > r.Start.Offset && isBlank(t.src[e-1]) {
				e--
			}
			if e > r.Start.Offset && e < r.End.Offset {
				end = t.position(e)
			}
		}
	}
	return protocol.Range{Start: start, End: end}
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// span converts a byte range to an LSP range.
func (t text) span(from, to int) protocol.Range {
	return protocol.Range{Start: t.position(from), End: t.position(to)}
}

func utf16Len(r rune) uint32 {
	if r >= 0x10000 && r <= utf8.MaxRune {
		return 2
	}
	return 1
}
