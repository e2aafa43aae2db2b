package lsp

import (
	"testing"

	"go.lsp.dev/protocol"

	"github.com/mqb-dev/mqb/diag"
)

func TestPositionConversion(t *testing.T) {
	// Line 1 holds é (2 bytes, 1 UTF-16 unit) and 😀 (4 bytes, 2 units);
	// line 2 ends in CRLF.
	src := "ab\n\"é😀\" x\r\ny"
	tx := newText([]byte(src))
	tests := []struct {
		off int
		pos protocol.Position
	}{
		{0, protocol.Position{Line: 0, Character: 0}},
		{2, protocol.Position{Line: 0, Character: 2}},  // the newline
		{3, protocol.Position{Line: 1, Character: 0}},  // "
		{4, protocol.Position{Line: 1, Character: 1}},  // é
		{6, protocol.Position{Line: 1, Character: 2}},  // 😀
		{10, protocol.Position{Line: 1, Character: 4}}, // closing "
		{12, protocol.Position{Line: 1, Character: 6}}, // x
		{15, protocol.Position{Line: 2, Character: 0}}, // y
		{16, protocol.Position{Line: 2, Character: 1}}, // end of text
	}
	for _, tt := range tests {
		if got := tx.position(tt.off); got != tt.pos {
			t.Errorf("position(%d) = %+v, want %+v", tt.off, got, tt.pos)
		}
		if got := tx.offset(tt.pos); got != tt.off {
			t.Errorf("offset(%+v) = %d, want %d", tt.pos, got, tt.off)
		}
	}
	// Inside a character: the start of it. Past a line's end: the end.
	if got := tx.position(7); got != (protocol.Position{Line: 1, Character: 2}) {
		t.Errorf("position inside 😀 = %+v", got)
	}
	if got := tx.offset(protocol.Position{Line: 0, Character: 99}); got != 2 {
		t.Errorf("offset past the end of line 0 = %d, want 2", got)
	}
	if got := tx.offset(protocol.Position{Line: 9}); got != len(src) {
		t.Errorf("offset past the last line = %d, want %d", got, len(src))
	}

	// diag positions convert through their byte offset; a position
	// without one falls back to its (byte) column.
	r := tx.diagRange(diag.Range{
		Start: diag.Pos{Line: 2, Col: 10, Offset: 12},
		End:   diag.Pos{Line: 2, Col: 11, Offset: 13},
	})
	if want := (protocol.Range{Start: protocol.Position{Line: 1, Character: 6}, End: protocol.Position{Line: 1, Character: 7}}); r != want {
		t.Errorf("diagRange = %+v, want %+v", r, want)
	}
	if got := tx.diagPosition(diag.Pos{Line: 2, Col: 2}); got != (protocol.Position{Line: 1, Character: 1}) {
		t.Errorf("diagPosition without offset = %+v", got)
	}
	if got := tx.diagPosition(diag.Pos{}); got != (protocol.Position{}) {
		t.Errorf("diagPosition of no position = %+v", got)
	}
}
