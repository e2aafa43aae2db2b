package lang

import (
	"github.com/alecthomas/participle/v2/lexer"
)

// The parts of an item the grammar leaves opaque: an expression, a key
// path, the path after `del` and the argument of `unnest`. Each reads raw
// tokens (newlines matter to them) and returns nil, the state unmoved,
// when what follows is not one.

// expr reads an expression: tokens while they continue one. It stops at a
// newline, a comma, a brace, or an operand that cannot follow the previous
// one, so `on = meta["k"]  case "a" { … }` ends before `case`.
func (p *parser) expr(s *state) *Expr {
	start := *s
	depth := 0
	prevOperand := false
	n := 0
loop:
	for {
		if raw := p.rawPeek(s); depth == 0 && (raw.Type == TNewline || raw.Type == TComment) {
			// A newline ends an expression, and a statement's argument
			// (`id payload.x`) must start on its line; but a value after
			// '=', '[' or ',' may start on a later line, as a list
			// element written one per line does.
			if n > 0 || !p.valueMayStartLater(s) {
				break
			}
		}
		t := p.peek(s)
		if t.Type == TEOF {
			break
		}
		switch t.Type {
		case TPunct:
			switch t.Value {
			case ",", "}":
				if depth == 0 {
					break loop
				}
				if t.Value == "}" {
					depth--
					prevOperand = true
				} else {
					prevOperand = false
				}
			case "{":
				if depth == 0 && (prevOperand || !p.mapLiteralAhead(s)) {
					break loop
				}
				depth++
				prevOperand = false
			case "(", "[":
				if depth == 0 && prevOperand && t.Value == "(" && n > 0 && p.toks[s.raw-1].Type != TIdent {
					break loop
				}
				depth++
				prevOperand = false
			case ")", "]":
				if depth == 0 {
					break loop
				}
				depth--
				prevOperand = true
			}
		case TIdent:
			if wordOps[t.Value] {
				prevOperand = false
				break
			}
			if prevOperand && depth == 0 {
				break loop
			}
			prevOperand = true
		case TInt, TFloat, TDuration, TString, TRaw:
			if prevOperand && depth == 0 {
				break loop
			}
			prevOperand = true
		case TOp:
			if t.Value == "=" && depth == 0 {
				break loop
			}
			prevOperand = false
		}
		p.advance(s)
		n++
	}
	if n == 0 {
		return nil
	}
	e := &Expr{Tokens: make([]lexer.Token, 0, n)}
	for i := start.next; i < s.raw; i++ {
		if t := &p.toks[i]; !elided(t) {
			e.Tokens = append(e.Tokens, *t)
		}
	}
	e.Pos = e.Tokens[0].Pos
	e.EndPos = tokenEnd(e.Tokens[n-1])
	return e
}

// mapLiteralAhead reports whether the "{" next opens an expr-lang map
// literal, `{}` or `{key: …}` with a quoted or bare key, rather than an
// mqb block, whose items never start `key:`.
func (p *parser) mapLiteralAhead(s *state) bool {
	b := *s
	p.advance(&b)
	k := p.advance(&b)
	if isPunct(*k, "}") {
		return true
	}
	if k.Type != TString && k.Type != TRaw && k.Type != TIdent {
		return false
	}
	return isOp(*p.peek(&b), ":")
}

// valueMayStartLater reports whether the last token other than a newline
// or a comment before s lets a value start on a later line: '=', '[' or
// ',' (not an item's key, whose argument must be on the key's line).
func (p *parser) valueMayStartLater(s *state) bool {
	for i := s.raw - 1; i >= 0; i-- {
		t := &p.toks[i]
		if elided(t) {
			continue
		}
		return t.Type == TOp && t.Value == "=" || t.Type == TPunct && (t.Value == "[" || t.Value == ",")
	}
	return false
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

// unnestArg reads what follows a key `unnest` when it ends the item: the
// array's path and, optionally, `as NAME`.
func (p *parser) unnestArg(s *state) *UnnestArg {
	root, segs, last, ok := p.pathAfterKey(s, "unnest")
	if !ok {
		return nil
	}
	var as *lexer.Token
	// The stream ends with one EOF token: read the name only after a word.
	if kw := p.rawAt(last + 1); kw.Type == TIdent && kw.Value == "as" {
		if name := p.rawAt(last + 2); name.Type == TIdent {
			as = &name
			last += 2
		}
	}
	// The argument must end the item. `unnest a as` with no name is
	// `unnest a`, then an item `as`.
	if !p.endsItem(last) {
		return nil
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

// identOf is the identifier of token t, ending at its last byte.
func identOf(t lexer.Token) *Ident {
	return &Ident{Pos: t.Pos, EndPos: tokenEnd(t), Name: t.Value}
}

// pathAfterKey reads the path that follows the item key key (del,
// unnest) at s: its root word, its segments, and the raw index of its
// last token.
func (p *parser) pathAfterKey(s *state, key string) (root lexer.Token, segs []Segment, last int, ok bool) {
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
			var closing lexer.Token
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
