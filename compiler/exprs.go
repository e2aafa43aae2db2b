package compiler

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/stdlib"
)

// Expression options, built once: the same environment the runtime uses.
var (
	exprOptions     = stdlib.ExprOptions(nil)
	exprBoolOptions = append(append([]expr.Option{}, exprOptions...), expr.AsBool())
)

// compiledExpr is an expression that passed expr-lang's checker, with its
// parse tree for the stability analysis.
type compiledExpr struct {
	src  string
	tree ast.Node
	at   diag.Pos // where src starts in the file
}

// compileExpr type-checks src with expr-lang. On failure it reports code
// (E020 for expressions, E021 for placeholders) at the position inside the
// file that expr-lang's error points to; whole is the range to blame when
// the position cannot be mapped (a rewritten mq-bridge alias).
func (rc *routeCtx) compileExpr(src string, at diag.Pos, mappable bool, whole diag.Range, code, what string, asBool bool) (*compiledExpr, bool) {
	opts := exprOptions
	if asBool {
		opts = exprBoolOptions
	}
	if strings.TrimSpace(src) == "" {
		rc.c.add(code, whole, what+" is empty", "Write an expression over payload, meta, message_id or env(\"NAME\").")
		return nil, false
	}
	if _, err := expr.Compile(src, opts...); err != nil {
		msg := err.Error()
		rng := whole
		var fe *file.Error
		if errors.As(err, &fe) {
			msg = fe.Message
			if mappable {
				rng = mapRange(src, at, fe.From, fe.To)
			}
		}
		rc.c.add(code, rng, what+" does not compile: "+msg, exprHint(msg))
		return nil, false
	}
	tree, err := parser.Parse(src)
	if err != nil { // cannot happen after a successful Compile
		return nil, false
	}
	return &compiledExpr{src: src, tree: tree.Node, at: at}, true
}

// exprHint adds a pointer to the names an expression can use.
func exprHint(msg string) string {
	if strings.Contains(msg, "unknown name") || strings.Contains(msg, "unknown func") || strings.Contains(msg, "cannot fetch") {
		return "Expressions see payload (the decoded record), meta (a map of strings), message_id and env(\"NAME\")."
	}
	return ""
}

// mapRange turns expr-lang's rune offsets inside src into a file range.
func mapRange(src string, at diag.Pos, from, to int) diag.Range {
	start := advance(at, src, runeOffset(src, from))
	end := start
	if to > from {
		end = advance(at, src, runeOffset(src, to))
	}
	if end.Line != start.Line || end.Offset <= start.Offset {
		end = start
		end.Col++
		end.Offset++
	}
	return diag.Range{Start: start, End: end}
}

func runeOffset(s string, runes int) int {
	off := 0
	for i := 0; i < runes && off < len(s); i++ {
		_, n := utf8.DecodeRuneInString(s[off:])
		off += n
	}
	return off
}

// advance moves p over src[:n], counting lines and byte columns.
func advance(p diag.Pos, src string, n int) diag.Pos {
	for i := 0; i < n && i < len(src); i++ {
		p.Offset++
		if src[i] == '\n' {
			p.Line++
			p.Col = 1
		} else {
			p.Col++
		}
	}
	return p
}
