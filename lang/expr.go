package lang

import (
	"strings"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/mqb-dev/mqb/diag"
)

// Expr is an expression written in expr-lang syntax, or a single literal
// (string, number, duration, identifier) that the checker interprets by the
// attribute's declared type. The grammar treats it as opaque: Parse takes
// tokens while they continue an expression and stops at a newline, a comma,
// a brace, or an operand that cannot follow the previous one — so
// `on = meta["k"]  case "a" { … }` ends the expression before `case`.
type Expr struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Tokens []lexer.Token
}

// operator words of expr-lang that join two operands.
var wordOps = map[string]bool{
	"in": true, "not": true, "and": true, "or": true, "matches": true,
	"contains": true, "startsWith": true, "endsWith": true,
}

// Parse implements participle.Parseable.
func (e *Expr) Parse(lex *lexer.PeekingLexer) error {
	depth := 0
	prevOperand := false
loop:
	for {
		if raw := lex.RawPeek(); depth == 0 && (raw.Type == TNewline || raw.Type == TComment) {
			// A newline ends an expression, and a statement's argument
			// (`id payload.x`) must start on its line; but a value after
			// '=', '[' or ',' may start on a later line, as a list
			// element written one per line does.
			if len(e.Tokens) > 0 || !valueMayStartLater(lex) {
				break
			}
		}
		t := lex.Peek()
		if t.EOF() {
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
				if depth == 0 && (prevOperand || !mapLiteralAhead(lex)) {
					break loop
				}
				depth++
				prevOperand = false
			case "(", "[":
				if depth == 0 && prevOperand && t.Value == "(" && len(e.Tokens) > 0 && e.Tokens[len(e.Tokens)-1].Type != TIdent {
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
		tok := lex.Next()
		e.Tokens = append(e.Tokens, *tok)
	}
	if len(e.Tokens) == 0 {
		return participle.NextMatch
	}
	e.Pos = e.Tokens[0].Pos
	last := e.Tokens[len(e.Tokens)-1]
	e.EndPos = last.Pos
	advance(&e.EndPos, last.Value)
	return nil
}

// mapLiteralAhead reports whether the "{" the lexer is at opens an
// expr-lang map literal, `{}` or `{key: …}` with a quoted or bare key,
// rather than an mqb block, whose items never start `key:`.
func mapLiteralAhead(lex *lexer.PeekingLexer) bool {
	cp := lex.MakeCheckpoint()
	defer lex.LoadCheckpoint(cp)
	lex.Next()
	k := lex.Next()
	if isPunct(*k, "}") {
		return true
	}
	if k.Type != TString && k.Type != TRaw && k.Type != TIdent {
		return false
	}
	return isOp(*lex.Peek(), ":")
}

// valueMayStartLater reports whether the last significant token before the
// lexer's position lets a value start on a later line: '=', '[' or ','
// (not an item's key, whose argument must be on the key's line).
func valueMayStartLater(lex *lexer.PeekingLexer) bool {
	for i := lex.MakeCheckpoint().RawCursor() - 1; i >= 0; i-- {
		t := lex.Range(i, i+1)[0]
		if t.Type == TNewline || t.Type == TComment {
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
func (e *Expr) Single() (lexer.Token, bool) {
	if len(e.Tokens) == 1 {
		return e.Tokens[0], true
	}
	return lexer.Token{}, false
}
