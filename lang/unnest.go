package lang

import (
	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/mqb-dev/mqb/diag"
)

// UnnestArg is what follows a key `unnest`: the path of the array and,
// optionally, `as NAME`: `payload.items as item` in
// `unnest payload.items as item`. It is read only right after a key
// `unnest` and only when it ends the item, as DelPath is; anything else
// after `unnest` is the item's argument, which the checker refuses.
type UnnestArg struct {
	Pos      lexer.Position
	EndPos   lexer.Position // just past the last byte of the path or the name
	Root     *Ident
	Segments []Segment
	// As is the name the element is kept under in the parent's payload;
	// nil when the element becomes the payload.
	As *Ident
}

// Parse implements participle.Parseable.
func (u *UnnestArg) Parse(lex *lexer.PeekingLexer) error {
	root, segs, last, ok := keyPath(lex, "unnest")
	if !ok {
		return participle.NextMatch
	}
	var as *lexer.Token
	// The stream ends with one EOF token: read the name only after a word.
	if kw := rawToken(lex, last+1); kw.Type == TIdent && kw.Value == "as" {
		if name := rawToken(lex, last+2); name.Type == TIdent {
			as = &name
			last += 2
		}
	}
	// The argument must end the item. `unnest a as` with no name is
	// `unnest a`, then an item `as`.
	if !endsItem(lex, last) {
		return participle.NextMatch
	}
	lex.FastForward(last)
	u.Root = &Ident{Pos: root.Pos, EndPos: tokenEnd(root), Name: root.Value}
	u.Segments = segs
	u.Pos, u.EndPos = root.Pos, u.Root.EndPos
	if len(segs) > 0 {
		u.EndPos = segs[len(segs)-1].EndPos
	}
	if as != nil {
		u.As = &Ident{Pos: as.Pos, EndPos: tokenEnd(*as), Name: as.Value}
		u.EndPos = u.As.EndPos
	}
	return nil
}

// PathText returns the array's path as written: `payload.items`.
func (u *UnnestArg) PathText() string { return pathText(u.Root, u.Segments) }

// Text returns the argument as written, normalised: `payload.items as item`.
func (u *UnnestArg) Text() string {
	if u.As == nil {
		return u.PathText()
	}
	return u.PathText() + " as " + u.As.Name
}

// Range of the argument.
func (u *UnnestArg) Range() diag.Range { return Range(u.Pos, u.EndPos) }

// afterKey reports whether the raw token before at is an item key named
// key (not a segment `.key` of a longer key) on the same line as at.
func afterKey(lex *lexer.PeekingLexer, at lexer.RawCursor, key string) bool {
	if at < 1 {
		return false
	}
	k := rawToken(lex, at-1)
	if k.Type != TIdent || k.Value != key {
		return false
	}
	return at < 2 || !isOp(rawToken(lex, at-2), ".")
}
