package lang

import "fmt"

// TokenType is the kind of a token (TIdent, TString, …).
type TokenType int

// Position is where a token starts: a byte offset, a line and a column
// counted in bytes, all from 1 but the offset.
type Position struct {
	Filename string
	Offset   int
	Line     int
	Column   int
}

// String writes the position as file:line:col (line:col without a file).
func (p Position) String() string {
	if p.Filename == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Column)
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
}

// Token is one lexed token: its type, its text as written and where it
// starts.
type Token struct {
	Type  TokenType
	Value string
	Pos   Position
}

// EOF reports whether the token ends the stream.
func (t Token) EOF() bool { return t.Type == TEOF }

// String is the token's text, or <EOF> for the end of the stream.
func (t Token) String() string {
	if t.EOF() {
		return "<EOF>"
	}
	return t.Value
}

// eofToken is the token ending a stream at pos.
func eofToken(pos Position) Token { return Token{Type: TEOF, Pos: pos} }
