package lang

import (
	"fmt"
)

// The parser is recursive descent over the lexed tokens, one function per
// production of grammar.ebnf, whose text is the function's comment (a test
// holds the two together). Newlines and comments are skipped between
// tokens (only Expr and the key paths read them); a node's Pos is its first
// token and its EndPos the raw token just after its last one, a newline or
// a comment included.
//
// Alternatives are tried in the grammar's order on a copy of the state, and
// a failed alternative is given up for the next one unless it read more
// than lookahead tokens past where it started: then its error is the
// parse's error. Among the errors of alternatives given up, the one that
// got furthest is kept, and it is the error reported when the file has
// tokens left over. Messages name what was expected as the grammar writes
// it ("unexpected token "=" (expected Block)").

// lookahead is how many tokens an alternative may read and still be given
// up for the next one when it fails.
const lookahead = 4

// parser holds one parse's tokens; the stream ends with an EOF token.
type parser struct {
	toks []Token
	// spare are the states alt and star try alternatives on, one per
	// level of nesting, reused: a copy passed to a production through a
	// func value escaped to the heap, some 3 KB a route.
	spare []*state
	depth int
}

// copyOf is a copy of s for an alternative to be tried on. It stays
// valid until the next copyOf after release.
func (p *parser) copyOf(s *state) *state {
	if p.depth == len(p.spare) {
		p.spare = append(p.spare, new(state))
	}
	b := p.spare[p.depth]
	p.depth++
	*b = *s
	return b
}

// release gives back the last copy taken, once the alternative tried on
// it has returned.
func (p *parser) release() { p.depth-- }

// state is where a parse is and the furthest error it has met. raw is the
// next token, newlines and comments included; next the next other token;
// cur how many other tokens have been read.
type state struct {
	raw, next, cur int
	err            perr
	errDepth       int
}

// perr is a syntax error: the token at index tok was not expected, and
// expect, when set, says what was.
type perr struct {
	set    bool
	tok    int
	expect string
}

// syntaxErr is a perr with its token, as the parse returns it.
type syntaxErr struct {
	tok    Token
	expect string
}

func (e *syntaxErr) Error() string {
	p := e.tok.Pos
	return fmt.Sprintf("%s:%d:%d: %s", p.Filename, p.Line, p.Column, e.Message())
}

// Position is where the unexpected token starts.
func (e *syntaxErr) Position() Position { return e.tok.Pos }

// Message is the error without its position.
func (e *syntaxErr) Message() string {
	m := fmt.Sprintf("unexpected token %q", e.tok.String())
	if e.expect != "" {
		m += " (expected " + e.expect + ")"
	}
	return m
}

func elided(t *Token) bool { return t.Type == TNewline || t.Type == TComment }

// parseDeclTokens parses toks, which end with an EOF token, as a whole
// file: its declarations, or the error that stops them.
func parseDeclTokens(toks []Token) ([]*Decl, *syntaxErr) {
	return (&parser{}).parse(toks)
}

// parse is parseDeclTokens on a parser whose spare states are kept from
// one call to the next (parseByDecl parses each declaration on one).
func (p *parser) parse(toks []Token) ([]*Decl, *syntaxErr) {
	p.toks, p.depth = toks, 0
	s := state{}
	p.skip(&s)
	decls, err := p.file(&s)
	if !err.set && p.peek(&s).Type != TEOF {
		err = s.deepest(perr{set: true, tok: s.next})
	}
	if err.set {
		return nil, &syntaxErr{tok: p.toks[err.tok], expect: err.expect}
	}
	return decls, nil
}

// skip moves next past newlines and comments.
func (p *parser) skip(s *state) {
	for t := &p.toks[s.next]; t.Type != TEOF && elided(t); t = &p.toks[s.next] {
		s.next++
	}
}

func (p *parser) peek(s *state) *Token    { return &p.toks[s.next] }
func (p *parser) rawPeek(s *state) *Token { return &p.toks[s.raw] }

// advance reads the next token other than a newline or a comment.
func (p *parser) advance(s *state) *Token {
	t := &p.toks[s.next]
	if t.Type == TEOF {
		return t
	}
	s.next++
	s.raw = s.next
	s.cur++
	p.skip(s)
	return t
}

// fastForward moves past the raw token at i.
func (p *parser) fastForward(s *state, i int) {
	for ; s.raw <= i; s.raw++ {
		t := &p.toks[s.raw]
		if t.Type == TEOF {
			break
		}
		if !elided(t) {
			s.cur++
		}
	}
	s.next = s.raw
	p.skip(s)
}

// rawAt is the raw token at i, or a zero token before the stream.
func (p *parser) rawAt(i int) Token {
	if i < 0 {
		return Token{}
	}
	return p.toks[i]
}

// lit reads the next token when its text is v.
func (p *parser) lit(s *state, v string) bool {
	if p.toks[s.next].Value == v {
		p.advance(s)
		return true
	}
	return false
}

// expected is the error of a production that stops before what it needs.
func (p *parser) expected(s *state, what string) perr {
	return perr{set: true, tok: s.next, expect: what}
}

// noted records err as the furthest error when the state is at least as
// far as the one recorded.
func (s *state) noted(err perr) {
	if s.cur >= s.errDepth {
		s.err, s.errDepth = err, s.cur
	}
}

// accept moves s to where the alternative b got, keeping b's furthest error.
func (s *state) accept(b *state) {
	s.raw, s.next, s.cur = b.raw, b.next, b.cur
	if b.errDepth >= s.errDepth {
		s.err, s.errDepth = b.err, b.errDepth
	}
}

// stop records the error err of the alternative b and reports whether b
// read too far to be given up; s is then where b failed.
func (s *state) stop(err perr, b *state) bool {
	if b.errDepth > s.errDepth {
		s.err, s.errDepth = b.err, b.errDepth
	} else if b.cur >= s.errDepth {
		s.err, s.errDepth = err, max(b.cur, b.errDepth)
	}
	if b.cur > s.cur+lookahead {
		s.accept(b)
		return true
	}
	return false
}

// deepest is the error to report for err, met at s: the furthest error
// recorded when it is further.
func (s *state) deepest(err perr) perr {
	if s.cur >= s.errDepth || !s.err.set {
		return err
	}
	return s.err
}

// alts tracks the failures of a production's alternatives.
type alts struct {
	first perr
	depth int
}

// failed records the error of alternative b and reports whether it ends
// the production (b read too far to be given up).
func (a *alts) failed(s, b *state, err perr) bool {
	if s.stop(err, b) {
		return true
	}
	if b.cur >= a.depth {
		a.first, a.depth = err, b.cur
	}
	return false
}

// none is the production's result when no alternative matched: the error
// of the one that got furthest, if any failed.
func (a *alts) none(s *state) perr {
	if a.first.set {
		s.noted(a.first)
	}
	return a.first
}

// File = Decl* .
func (p *parser) file(s *state) ([]*Decl, perr) {
	var decls []*Decl
	if err := star(p, s, p.decl, func(d *Decl) { decls = append(decls, d) }); err.set {
		return nil, err
	}
	return decls, perr{}
}

// Decl = Route | NamedEndpoint .
func (p *parser) decl(s *state) (*Decl, bool, perr) {
	var a alts
	if r, ok, err := alt(p, &a, s, p.route); ok || err.set {
		return &Decl{Route: r}, ok, err
	}
	if e, ok, err := alt(p, &a, s, p.endpoint); ok || err.set {
		return &Decl{Endpoint: e}, ok, err
	}
	return nil, false, a.none(s)
}

// fail is a production's failure with err: noted where it happened.
func fail(s *state, err perr) perr {
	s.noted(err)
	return err
}

// star reads one* on copies of s, handing each match to add. It stops at
// the first item that does not match; an item that failed after reading
// past lookahead is the production's error.
func star[T any](p *parser, s *state, one func(*state) (T, bool, perr), add func(T)) perr {
	for {
		b := p.copyOf(s)
		v, ok, err := one(b)
		p.release() // b is read below, before the next copyOf
		if err.set {
			s.noted(err)
			if s.stop(err, b) {
				return err
			}
			return perr{}
		}
		s.accept(b)
		if !ok {
			return perr{}
		}
		add(v)
	}
}

// alt tries one alternative of a production on a copy of s. matched when
// it did, s then past it; err (noted) when it failed after reading past
// lookahead, which ends the production; neither when the next alternative
// is to be tried.
func alt[T any](p *parser, a *alts, s *state, one func(*state) (T, bool, perr)) (v T, matched bool, err perr) {
	b := p.copyOf(s)
	v, ok, err := one(b)
	p.release() // b is read below, before the next copyOf
	switch {
	case err.set:
		if a.failed(s, b, err) {
			return v, false, fail(s, err)
		}
	case ok:
		s.accept(b)
		return v, true, perr{}
	}
	return v, false, perr{}
}

// Route = "route" Ident Block .
func (p *parser) route(s *state) (*Route, bool, perr) {
	pos := p.peek(s).Pos
	if !p.lit(s, "route") {
		return nil, false, perr{}
	}
	name := p.ident(s)
	if name == nil {
		return nil, false, fail(s, p.expected(s, "Ident Block"))
	}
	body, ok, err := p.block(s)
	if err.set {
		return nil, false, fail(s, err)
	}
	if !ok {
		return nil, false, fail(s, p.expected(s, "Block"))
	}
	return &Route{Pos: pos, EndPos: p.rawPeek(s).Pos, Name: name, Body: body}, true, perr{}
}

// NamedEndpoint = ("output" | "input") Ident "=" Ident Block .
func (p *parser) endpoint(s *state) (*NamedEndpoint, bool, perr) {
	t := p.peek(s)
	if t.Value != "output" && t.Value != "input" {
		return nil, false, perr{}
	}
	e := &NamedEndpoint{Pos: t.Pos, Dir: t.Value}
	p.advance(s)
	if e.Name = p.ident(s); e.Name == nil {
		return nil, false, fail(s, p.expected(s, `Ident "=" Ident Block`))
	}
	if !p.lit(s, "=") {
		return nil, false, fail(s, p.expected(s, `"=" Ident Block`))
	}
	if e.Kind = p.ident(s); e.Kind == nil {
		return nil, false, fail(s, p.expected(s, "Ident Block"))
	}
	body, ok, err := p.block(s)
	if err.set {
		return nil, false, fail(s, err)
	}
	if !ok {
		return nil, false, fail(s, p.expected(s, "Block"))
	}
	e.Body, e.EndPos = body, p.rawPeek(s).Pos
	return e, true, perr{}
}

// Ident = <ident> .
func (p *parser) ident(s *state) *Ident {
	t := p.peek(s)
	if t.Type != TIdent {
		return nil
	}
	p.advance(s)
	return &Ident{Pos: t.Pos, EndPos: p.rawPeek(s).Pos, Name: t.Value}
}

// Str = (<string> | <raw>) .
func (p *parser) str(s *state) *Str {
	t := p.peek(s)
	if t.Type != TString && t.Type != TRaw {
		return nil
	}
	p.advance(s)
	return &Str{Pos: t.Pos, EndPos: p.rawPeek(s).Pos, Raw: t.Value}
}

// Block = "{" BlockEntry* "}" .
func (p *parser) block(s *state) (*Block, bool, perr) {
	pos := p.peek(s).Pos
	if !p.lit(s, "{") {
		return nil, false, perr{}
	}
	var entries []*BlockEntry
	if err := star(p, s, p.entry, func(e *BlockEntry) { entries = append(entries, e) }); err.set {
		return nil, false, fail(s, err)
	}
	if !p.lit(s, "}") {
		return nil, false, fail(s, p.expected(s, `"}"`))
	}
	return &Block{Pos: pos, EndPos: p.rawPeek(s).Pos, Entries: entries}, true, perr{}
}

// BlockEntry = Item | "," .
func (p *parser) entry(s *state) (*BlockEntry, bool, perr) {
	var a alts
	if it, ok, err := alt(p, &a, s, p.item); ok || err.set {
		return &BlockEntry{Item: it}, ok, err
	}
	b := *s
	if p.lit(&b, ",") {
		s.accept(&b)
		return &BlockEntry{Sep: ","}, true, perr{}
	}
	if err := a.none(s); err.set {
		return nil, false, fail(s, err)
	}
	return nil, false, perr{}
}

// Item = Ident KeyPath? (("ref" Ident) | ("=" Value) | ((((?= <ident> "{") Ident) | ((?= (<string> | <raw>) "{") Str))? Block) | DelPath | UnnestArg | Expr)? .
func (p *parser) item(s *state) (*Item, bool, perr) {
	pos := p.peek(s).Pos
	key := p.ident(s)
	if key == nil {
		return nil, false, perr{}
	}
	it := &Item{Pos: pos, Key: key}
	it.Path = p.keyPath(s)
	b := *s
	if err := p.itemTail(&b, it); err.set {
		s.noted(err)
		if s.stop(err, &b) {
			return nil, false, fail(s, err)
		}
	} else {
		s.accept(&b)
	}
	it.EndPos = p.rawPeek(s).Pos
	return it, true, perr{}
}

// itemTail reads what follows an item's key into it, trying each form in
// the grammar's order; it leaves it as it is when none matches.
func (p *parser) itemTail(s *state, it *Item) perr {
	var a alts
	// "ref" Ident
	b := *s
	if p.lit(&b, "ref") {
		if id := p.ident(&b); id != nil {
			s.accept(&b)
			it.Ref = id
			return perr{}
		}
		if err := p.expected(&b, "Ident"); a.failed(s, &b, err) {
			return err
		}
	}
	// "=" Value
	b = *s
	if p.lit(&b, "=") {
		v, ok, err := p.value(&b)
		switch {
		case err.set:
		case ok:
			s.accept(&b)
			it.Assign = v
			return perr{}
		default:
			err = p.expected(&b, "Value")
		}
		if a.failed(s, &b, err) {
			return err
		}
	}
	// ( Ident-before-"{" | Str-before-"{" )? Block
	b = *s
	kind, label := p.kindOrLabel(&b)
	body, ok, err := p.block(&b)
	switch {
	case err.set:
	case ok:
		s.accept(&b)
		it.Kind, it.Label, it.Body = kind, label, body
		return perr{}
	default:
		err = p.expected(&b, "Block")
	}
	if a.failed(s, &b, err) {
		return err
	}
	// DelPath | UnnestArg | Expr
	b = *s
	if d := p.delPath(&b); d != nil {
		s.accept(&b)
		it.Del = d
		return perr{}
	}
	b = *s
	if u := p.unnestArg(&b); u != nil {
		s.accept(&b)
		it.Unnest = u
		return perr{}
	}
	b = *s
	if e := p.expr(&b); e != nil {
		s.accept(&b)
		it.Arg = e
		return perr{}
	}
	return a.none(s)
}

// kindOrLabel reads the optional kind or label before an item's block:
// a name or a string followed by "{". The two are alternatives of an
// optional group, tried on a copy g of s.
func (p *parser) kindOrLabel(s *state) (*Ident, *Str) {
	var a alts
	g := *s
	b := g
	if p.before(&b, TIdent, "{") {
		kind := p.ident(&b)
		g.accept(&b)
		s.accept(&g)
		return kind, nil
	}
	a.failed(&g, &b, perr{set: true, tok: b.next})
	b = g
	if p.before(&b, TString, "{") || p.before(&b, TRaw, "{") {
		label := p.str(&b)
		g.accept(&b)
		s.accept(&g)
		return nil, label
	}
	a.failed(&g, &b, perr{set: true, tok: b.next})
	// The group is optional: the failure is noted, and the item goes on
	// to its block.
	err := a.none(&g)
	s.noted(err)
	s.stop(err, &g)
	return nil, nil
}

// before reports whether the next two tokens are one of type typ and then
// v, newlines and comments between them skipped.
func (p *parser) before(s *state, typ TokenType, v string) bool {
	b := *s
	if p.peek(&b).Type != typ {
		return false
	}
	p.advance(&b)
	return p.peek(&b).Value == v
}

// Value = List | ((?! "{" ","* (<string> | <raw> | <ident>) ":") Block) | Expr .
func (p *parser) value(s *state) (*Value, bool, perr) {
	var a alts
	v := &Value{Pos: p.peek(s).Pos}
	l, ok, err := alt(p, &a, s, p.list)
	if err.set {
		return nil, false, err
	}
	if ok {
		v.List = l
		v.EndPos = p.rawPeek(s).Pos
		return v, true, perr{}
	}
	b := *s
	if p.mapLiteral(&b) {
		err = perr{set: true, tok: b.next}
	} else {
		var blk *Block
		blk, ok, err = p.block(&b)
		switch {
		case err.set:
		case ok:
			s.accept(&b)
			v.Block = blk
			v.EndPos = p.rawPeek(s).Pos
			return v, true, perr{}
		default:
			err = p.expected(&b, "Block")
		}
	}
	if a.failed(s, &b, err) {
		return nil, false, fail(s, err)
	}
	b = *s
	if e := p.expr(&b); e != nil {
		s.accept(&b)
		v.Expr = e
		v.EndPos = p.rawPeek(s).Pos
		return v, true, perr{}
	}
	if err := a.none(s); err.set {
		return nil, false, fail(s, err)
	}
	return nil, false, perr{}
}

// mapLiteral reports whether the next tokens are "{" then a string, a raw
// block or a name, then ":": an expr-lang map literal, not a block. Commas
// after the "{" are skipped: a block drops them when formatted, so
// "{, a: 1}" must be what "{ a: 1 }" is.
func (p *parser) mapLiteral(s *state) bool {
	b := *s
	if !p.lit(&b, "{") {
		return false
	}
	for p.lit(&b, ",") {
	}
	switch p.peek(&b).Type {
	case TString, TRaw, TIdent:
	default:
		return false
	}
	p.advance(&b)
	return p.peek(&b).Value == ":"
}

// List = "[" (Value | ",")* "]" .
func (p *parser) list(s *state) (*List, bool, perr) {
	pos := p.peek(s).Pos
	if !p.lit(s, "[") {
		return nil, false, perr{}
	}
	var elems []*Value
	err := star(p, s, p.listEntry, func(v *Value) {
		if v != nil {
			elems = append(elems, v)
		}
	})
	if err.set {
		return nil, false, fail(s, err)
	}
	if !p.lit(s, "]") {
		return nil, false, fail(s, p.expected(s, `"]"`))
	}
	return &List{Pos: pos, EndPos: p.rawPeek(s).Pos, Elems: elems}, true, perr{}
}

// listEntry is one of List's (Value | ","); a comma matches with a nil value.
func (p *parser) listEntry(s *state) (*Value, bool, perr) {
	var a alts
	if v, ok, err := alt(p, &a, s, p.value); ok || err.set {
		return v, ok, err
	}
	b := *s
	if p.lit(&b, ",") {
		s.accept(&b)
		return nil, true, perr{}
	}
	return nil, false, a.none(s)
}
