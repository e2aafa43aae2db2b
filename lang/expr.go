package lang

import (
	"strings"

	"github.com/mqb-dev/mqb/diag"
)

// Expr is an expression written in expr-lang syntax, or a single literal
// (string, number, duration, identifier) that the checker interprets by the
// attribute's declared type. The grammar treats it as opaque: Parse takes
// tokens while they continue an expression and stops at a newline, a comma,
// a brace, or an operand that cannot follow the previous one — so
// `on = meta["k"]  case "a" { … }` ends the expression before `case`.
type Expr struct {
	Pos    Position
	EndPos Position
	Tokens []Token
}

// operator words of expr-lang that join two operands.
var wordOps = map[string]bool{
	"in": true, "not": true, "and": true, "or": true, "matches": true,
	"contains": true, "startsWith": true, "endsWith": true,
}

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
	e := &Expr{Tokens: make([]Token, 0, n)}
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

// Range of the expression.
func (e *Expr) Range() diag.Range { return Range(e.Pos, e.EndPos) }

// Text returns the expression's source text as written.
func (e *Expr) Text(src []byte) string {
	if e.Pos.Offset <= e.EndPos.Offset && e.EndPos.Offset <= len(src) {
		return string(src[e.Pos.Offset:e.EndPos.Offset])
	}
	var b strings.Builder
	for i, t := range e.Tokens {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Value)
	}
	return b.String()
}

// Single returns the expression's only token when it is one token long.
func (e *Expr) Single() (Token, bool) {
	if len(e.Tokens) == 1 {
		return e.Tokens[0], true
	}
	return Token{}, false
}
