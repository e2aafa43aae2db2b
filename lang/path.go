package lang

import (
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/mqb-dev/mqb/diag"
)

// Paths are the targets of a map block: `payload.customer.email = …`,
// `meta["k"] = …`, `del payload.tmp`. The grammar reads them anywhere an
// item key stands; the checker takes them only inside map.

// Segment is one step of a path after its root name: `.email` or `["k"]`.
type Segment struct {
	Pos    lexer.Position
	EndPos lexer.Position // just past the segment's last byte
	// Name is the field or key: email for `.email`, k for `["k"]`.
	Name string
	// Quoted is the string token of an indexed segment, as written; nil
	// for `.name`.
	Quoted *lexer.Token
	// Bad, when set, says why the segment is malformed (`payload.` with no
	// name, `meta["k"` with no `]`); the parser reports it as E001.
	Bad string
}

// Text returns the segment as written: `.email` or `["k"]`.
func (s Segment) Text() string {
	if s.Quoted != nil {
		return "[" + s.Quoted.Value + "]"
	}
	return "." + s.Name
}

// KeyPath is the rest of an item key written as a path: `.customer.email`
// in `payload.customer.email = …`, `["k"]` in `meta["k"] = …`. A `.` may
// follow the name after spaces; a `[` must touch it, so `id ["a"]` stays
// an item with a list argument.
type KeyPath struct {
	Pos      lexer.Position
	EndPos   lexer.Position
	Segments []Segment
}

// Parse implements participle.Parseable.
func (p *KeyPath) Parse(lex *lexer.PeekingLexer) error {
	segs, last, ok := readSegments(lex, lex.MakeCheckpoint().RawCursor(), true)
	if !ok || len(segs) == 0 {
		return participle.NextMatch
	}
	lex.FastForward(last)
	p.Segments = segs
	p.Pos, p.EndPos = segs[0].Pos, segs[len(segs)-1].EndPos
	return nil
}

// Text returns the path as written, without its root name.
func (p *KeyPath) Text() string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, s := range p.Segments {
		b.WriteString(s.Text())
	}
	return b.String()
}

// DelPath is the path after `del` in a map block: `payload.tmp` in
// `del payload.tmp`. It is read only right after a key `del`, and only
// when the path ends the item (see Parse); anything else after `del` is
// the item's argument, as before.
type DelPath struct {
	Pos      lexer.Position
	EndPos   lexer.Position // just past the path's last byte
	Root     *Ident
	Segments []Segment
}

// Parse implements participle.Parseable.
func (d *DelPath) Parse(lex *lexer.PeekingLexer) error {
	root, segs, last, ok := keyPath(lex, "del")
	// The path must end the item (`{ del a b }` is `del a` and `b`, as
	// `{ del a, b }` is, which is how fmt prints it).
	if !ok || !endsItem(lex, last) {
		return participle.NextMatch
	}
	lex.FastForward(last)
	end := root.Pos
	advance(&end, root.Value)
	d.Root = &Ident{Pos: root.Pos, EndPos: end, Name: root.Value}
	d.Segments = segs
	d.Pos, d.EndPos = root.Pos, end
	if len(segs) > 0 {
		d.EndPos = segs[len(segs)-1].EndPos
	}
	return nil
}

// Text returns the path as written: `payload.a.b`.
func (d *DelPath) Text() string { return pathText(d.Root, d.Segments) }

// pathText writes a path as written: its root word, then its segments.
func pathText(root *Ident, segs []Segment) string {
	var b strings.Builder
	b.WriteString(root.Name)
	for _, s := range segs {
		b.WriteString(s.Text())
	}
	return b.String()
}

// Range of the path.
func (d *DelPath) Range() diag.Range { return Range(d.Pos, d.EndPos) }

// readSegments reads `.name` and `["key"]` segments from the raw token at
// from on, and returns them with the raw index of their last token. A
// segment never spans lines. When mayBeBad is set a malformed segment is
// kept with its Bad reason (the item is then an error the parser reports);
// otherwise it ends the read with ok false.
func readSegments(lex *lexer.PeekingLexer, from lexer.RawCursor, mayBeBad bool) (segs []Segment, last lexer.RawCursor, ok bool) {
	i := from
	last = from - 1
	prevEnd := tokenEnd(rawToken(lex, from-1))
	for {
		t := rawToken(lex, i)
		switch {
		case isOp(t, "."):
			name := rawToken(lex, i+1)
			if name.Type != TIdent {
				if !mayBeBad {
					return nil, 0, false
				}
				return append(segs, Segment{Pos: t.Pos, EndPos: tokenEnd(t), Bad: `expected a field name after "."`}), i, true
			}
			end := tokenEnd(name)
			segs = append(segs, Segment{Pos: t.Pos, EndPos: end, Name: name.Value})
			i += 2
			last, prevEnd = i-1, end
		case isPunct(t, "[") && t.Pos.Offset == prevEnd.Offset:
			key := rawToken(lex, i+1)
			var closing lexer.Token
			if !key.EOF() {
				closing = rawToken(lex, i+2)
			}
			if key.Type != TString || !isPunct(closing, "]") {
				if !mayBeBad {
					return nil, 0, false
				}
				bad := Segment{Pos: t.Pos, EndPos: tokenEnd(t), Bad: `a key in a path is a quoted string in brackets: meta["k"], payload["a b"]`}
				if key.Type == TString {
					bad.EndPos, bad.Bad, i = tokenEnd(key), `expected "]" after the key`, i+1
				} else if j, found := closingOnLine(lex, i); found {
					// meta[5]: the segment is wrong as a whole; the rest of
					// the item still reads.
					bad.EndPos, i = tokenEnd(rawToken(lex, j)), j
				}
				return append(segs, bad), i, true
			}
			end := tokenEnd(closing)
			q := key
			segs = append(segs, Segment{Pos: t.Pos, EndPos: end, Name: StringValue(key), Quoted: &q})
			i += 3
			last, prevEnd = i-1, end
		default:
			return segs, last, true
		}
	}
}

// closingOnLine finds the first "]" after the "[" at i on the same line.
func closingOnLine(lex *lexer.PeekingLexer, i lexer.RawCursor) (lexer.RawCursor, bool) {
	for j := i + 1; ; j++ {
		t := rawToken(lex, j)
		switch {
		case t.EOF() || t.Type == TNewline || t.Type == TComment:
			return 0, false
		case isPunct(t, "]"):
			return j, true
		}
	}
}

// rawToken returns the raw token at i. The stream ends with an EOF token,
// so i may be at most one past a token that is not EOF.
func rawToken(lex *lexer.PeekingLexer, i lexer.RawCursor) lexer.Token {
	if i < 0 {
		return lexer.Token{}
	}
	return lex.Range(i, i+1)[0]
}

func tokenEnd(t lexer.Token) lexer.Position {
	end := t.Pos
	advance(&end, t.Value)
	return end
}

func isOp(t lexer.Token, v string) bool { return t.Type == TOp && t.Value == v }

// KeyText returns the item's key as written: `path`, `payload.a.b`,
// `meta["k"]`.
func (it *Item) KeyText() string { return it.Key.Name + it.Path.Text() }

// KeyRange is the range of the item's key, its path included.
func (it *Item) KeyRange() diag.Range {
	if it.Path == nil {
		return it.Key.Range()
	}
	return Range(it.Key.Pos, it.Path.EndPos)
}

// keyPath reads the path that follows the item key key (del, unnest)
// from the lexer's cursor: its root word, its segments, and the raw
// cursor of its last token.
func keyPath(lex *lexer.PeekingLexer, key string) (root lexer.Token, segs []Segment, last lexer.RawCursor, ok bool) {
	at := lex.MakeCheckpoint().RawCursor()
	if !afterKey(lex, at, key) {
		return root, nil, 0, false
	}
	if root = rawToken(lex, at); root.Type != TIdent {
		return root, nil, 0, false
	}
	if segs, last, ok = readSegments(lex, at+1, false); !ok {
		return root, nil, 0, false
	}
	if len(segs) == 0 {
		last = at
	}
	return root, segs, last, true
}

// endsItem reports whether the token after last ends an item: a newline,
// a comment, a comma, the block's end, or the next item's key on the
// same line, so that what fmt prints (one item per line, or a comma
// between) reads back the same.
func endsItem(lex *lexer.PeekingLexer, last lexer.RawCursor) bool {
	next := rawToken(lex, last+1)
	return next.EOF() || next.Type == TNewline || next.Type == TComment || next.Type == TIdent || isPunct(next, ",") || isPunct(next, "}")
}
