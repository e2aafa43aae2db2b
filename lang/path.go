package lang

import (
	"strings"

	"github.com/mqb-dev/mqb/diag"
)

// Paths are the targets of a map block: `payload.customer.email = …`,
// `meta["k"] = …`, `del payload.tmp`. The grammar reads them anywhere an
// item key stands; the checker takes them only inside map.

// Segment is one step of a path after its root name: `.email` or `["k"]`.
type Segment struct {
	Pos    Position
	EndPos Position // just past the segment's last byte
	// Name is the field or key: email for `.email`, k for `["k"]`.
	Name string
	// Quoted is the string token of an indexed segment, as written; nil
	// for `.name`.
	Quoted *Token
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
	Pos      Position
	EndPos   Position
	Segments []Segment
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
	Pos      Position
	EndPos   Position // just past the path's last byte
	Root     *Ident
	Segments []Segment
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

func tokenEnd(t Token) Position {
	end := t.Pos
	advance(&end, t.Value)
	return end
}

func isOp(t Token, v string) bool { return t.Type == TOp && t.Value == v }

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

// keyPath reads the path written after an item's key, if any.
func (p *parser) keyPath(s *state) *KeyPath {
	segs, last, ok := p.readSegments(s.raw, true)
	if !ok || len(segs) == 0 {
		return nil
	}
	p.fastForward(s, last)
	return &KeyPath{Pos: segs[0].Pos, EndPos: segs[len(segs)-1].EndPos, Segments: segs}
}

// delPath reads the path after a key `del` when it ends the item.
func (p *parser) delPath(s *state) *DelPath {
	root, segs, last, ok := p.pathAfterKey(s, "del")
	// The path must end the item (`{ del a b }` is `del a` and `b`, as
	// `{ del a, b }` is, which is how fmt prints it).
	if !ok || !p.endsItem(last) {
		return nil
	}
	p.fastForward(s, last)
	d := &DelPath{Root: identOf(root), Segments: segs}
	d.Pos, d.EndPos = root.Pos, d.Root.EndPos
	if len(segs) > 0 {
		d.EndPos = segs[len(segs)-1].EndPos
	}
	return d
}

// identOf is the identifier of token t, ending at its last byte.
func identOf(t Token) *Ident {
	return &Ident{Pos: t.Pos, EndPos: tokenEnd(t), Name: t.Value}
}

// pathAfterKey reads the path that follows the item key key (del,
// unnest) at s: its root word, its segments, and the raw index of its
// last token.
func (p *parser) pathAfterKey(s *state, key string) (root Token, segs []Segment, last int, ok bool) {
	at := s.raw
	if at < 1 {
		return root, nil, 0, false
	}
	if k := p.toks[at-1]; k.Type != TIdent || k.Value != key || at >= 2 && isOp(p.toks[at-2], ".") {
		return root, nil, 0, false
	}
	if root = p.toks[at]; root.Type != TIdent {
		return root, nil, 0, false
	}
	if segs, last, ok = p.readSegments(at+1, false); !ok {
		return root, nil, 0, false
	}
	if len(segs) == 0 {
		last = at
	}
	return root, segs, last, true
}

// endsItem reports whether the raw token after last ends an item: a
// newline, a comment, a comma, the block's end, or the next item's key on
// the same line, so that what fmt prints (one item per line, or a comma
// between) reads back the same.
func (p *parser) endsItem(last int) bool {
	next := p.rawAt(last + 1)
	return next.EOF() || next.Type == TNewline || next.Type == TComment || next.Type == TIdent || isPunct(next, ",") || isPunct(next, "}")
}

// readSegments reads `.name` and `["key"]` segments from the raw token at
// from on, and returns them with the raw index of their last token. A
// segment never spans lines. When mayBeBad is set a malformed segment is
// kept with its Bad reason (the item is then an error the parser reports);
// otherwise it ends the read with ok false.
func (p *parser) readSegments(from int, mayBeBad bool) (segs []Segment, last int, ok bool) {
	i := from
	last = from - 1
	prevEnd := tokenEnd(p.rawAt(from - 1))
	for {
		t := p.rawAt(i)
		switch {
		case isOp(t, "."):
			name := p.rawAt(i + 1)
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
			key := p.rawAt(i + 1)
			var closing Token
			if !key.EOF() {
				closing = p.rawAt(i + 2)
			}
			if key.Type != TString || !isPunct(closing, "]") {
				if !mayBeBad {
					return nil, 0, false
				}
				bad := Segment{Pos: t.Pos, EndPos: tokenEnd(t), Bad: `a key in a path is a quoted string in brackets: meta["k"], payload["a b"]`}
				if key.Type == TString {
					bad.EndPos, bad.Bad, i = tokenEnd(key), `expected "]" after the key`, i+1
				} else if j, found := p.closingOnLine(i); found {
					// meta[5]: the segment is wrong as a whole; the rest of
					// the item still reads.
					bad.EndPos, i = tokenEnd(p.rawAt(j)), j
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
func (p *parser) closingOnLine(i int) (int, bool) {
	for j := i + 1; ; j++ {
		t := p.rawAt(j)
		switch {
		case t.EOF() || t.Type == TNewline || t.Type == TComment:
			return 0, false
		case isPunct(t, "]"):
			return j, true
		}
	}
}
