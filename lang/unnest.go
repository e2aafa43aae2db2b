package lang

import (
	"github.com/mqb-dev/mqb/diag"
)

// UnnestArg is what follows a key `unnest`: the path of the array and,
// optionally, `as NAME`: `payload.items as item` in
// `unnest payload.items as item`. It is read only right after a key
// `unnest` and only when it ends the item, as DelPath is; anything else
// after `unnest` is the item's argument, which the checker refuses.
type UnnestArg struct {
	Pos      Position
	EndPos   Position // just past the last byte of the path or the name
	Root     *Ident
	Segments []Segment
	// As is the name the element is kept under in the parent's payload;
	// nil when the element becomes the payload.
	As *Ident
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

// unnestArg reads what follows a key `unnest` when it ends the item: the
// array's path and, optionally, `as NAME`.
func (p *parser) unnestArg(s *state) *UnnestArg {
	root, segs, last, ok := p.pathAfterKey(s, "unnest")
	if !ok {
		return nil
	}
	var as *Token
	pathLast := last
	// The stream ends with one EOF token: read the name only after a word.
	if kw := p.rawAt(last + 1); kw.Type == TIdent && kw.Value == "as" {
		if name := p.rawAt(last + 2); name.Type == TIdent {
			as = &name
			last += 2
		}
	}
	// The argument must end the item. `unnest a as` with no name is
	// `unnest a`, then an item `as`; so is `unnest a as b()`, whose
	// `as b` does not end the item, as fmt prints it (one item a line).
	if !p.endsItem(last) {
		if as == nil {
			return nil
		}
		as, last = nil, pathLast
	}
	p.fastForward(s, last)
	u := &UnnestArg{Root: identOf(root), Segments: segs}
	u.Pos, u.EndPos = root.Pos, u.Root.EndPos
	if len(segs) > 0 {
		u.EndPos = segs[len(segs)-1].EndPos
	}
	if as != nil {
		u.As = identOf(*as)
		u.EndPos = u.As.EndPos
	}
	return u
}
