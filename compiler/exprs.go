package compiler

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/stdlib"
)

// exprChecker type-checks expressions against stdlib's environment. It
// runs expr-lang's own parser and checker (checker.ParseCheck) over a
// config built by the same options expr.Compile applies — exactly the
// front half of expr.Compile(src, stdlib.ExprOptions(nil)...), without
// rebuilding the config and emitting bytecode for every expression, which
// dominated build time. Results are memoised per build: generated files
// repeat the same expressions across routes.
type exprChecker struct {
	any, boolean *conf.Config
	memo         map[exprKey]exprResult
}

type exprKey struct {
	src    string
	asBool bool
}

type exprResult struct {
	tree ast.Node
	err  error
}

func newExprChecker() *exprChecker {
	return &exprChecker{
		any:     exprConfig(stdlib.ExprOptions(nil)...),
		boolean: exprConfig(append(stdlib.ExprOptions(nil), expr.AsBool())...),
		memo:    map[exprKey]exprResult{},
	}
}

// exprConfig builds a config as expr.Compile does.
func exprConfig(opts ...expr.Option) *conf.Config {
	c := conf.CreateNew()
	for _, op := range opts {
		op(c)
	}
	for name := range c.Disabled {
		delete(c.Builtins, name)
	}
	c.Check()
	return c
}

func (ec *exprChecker) check(src string, asBool bool) (ast.Node, error) {
	k := exprKey{src, asBool}
	if r, ok := ec.memo[k]; ok {
		return r.tree, r.err
	}
	cfg := ec.any
	if asBool {
		cfg = ec.boolean
	}
	tree, err := checker.ParseCheck(src, cfg)
	var node ast.Node
	if err == nil {
		node = tree.Node
	}
	ec.memo[k] = exprResult{node, err}
	return node, err
}

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
// the position cannot be mapped (a rewritten mq-bridge alias). what names
// the expression in a diagnostic; it is called only to report one (a
// placeholder's name was a Sprintf for every placeholder of every route).
func (rc *routeCtx) compileExpr(src string, at diag.Pos, mappable bool, whole diag.Range, code string, what func() string, asBool bool) (*compiledExpr, bool) {
	if strings.TrimSpace(src) == "" {
		rc.c.add(code, whole, what()+" is empty", "Write an expression over payload, meta, message_id or env(\"NAME\").")
		return nil, false
	}
	tree, err := rc.c.exprs.check(src, asBool)
	if err != nil {
		msg := err.Error()
		rng := whole
		var fe *file.Error
		if errors.As(err, &fe) {
			msg = fe.Message
			if mappable {
				rng = mapRange(src, at, fe.From, fe.To)
			}
		}
		rc.c.add(code, rng, what()+" does not compile: "+msg, exprHint(msg))
		return nil, false
	}
	rc.checkMetaDefault(tree, src, at, mappable, whole)
	return &compiledExpr{src: src, tree: tree, at: at}, true
}

// checkMetaDefault warns (W022) at each `meta[…] ?? x` in tree: meta maps
// strings to strings, so a key that is not there reads as "", never nil,
// and the default is never taken.
func (rc *routeCtx) checkMetaDefault(tree ast.Node, src string, at diag.Pos, mappable bool, whole diag.Range) {
	if rc.inNamedUnused || !strings.Contains(src, "??") {
		return
	}
	v := &metaDefaultFinder{}
	ast.Walk(&tree, v)
	for _, n := range v.found {
		rng := whole
		if mappable {
			// From meta to the end of ??.
			rng = mapRange(src, at, n.meta.Location().From, n.op.Location().To)
		}
		rc.c.add("W022", rng, "meta[…] ?? … never takes its default: a meta key that is not there reads as \"\", not nil",
			"meta holds strings, so ?? sees \"\" for a missing key and keeps it. Write `\"key\" in meta ? meta[\"key\"] : \"default\"` to tell a missing key apart, or `meta[\"key\"] != \"\" ? meta[\"key\"] : \"default\"` to replace an empty one too.")
	}
}

// metaDefaultFinder collects the ?? nodes whose left side reads meta.
type metaDefaultFinder struct {
	found []struct{ meta, op ast.Node }
}

func (f *metaDefaultFinder) Visit(node *ast.Node) {
	b, ok := (*node).(*ast.BinaryNode)
	if !ok || b.Operator != "??" {
		return
	}
	left := b.Left
	if c, ok := left.(*ast.ChainNode); ok {
		left = c.Node
	}
	if m, ok := left.(*ast.MemberNode); ok {
		if id, ok := m.Node.(*ast.IdentifierNode); ok && id.Value == "meta" {
			f.found = append(f.found, struct{ meta, op ast.Node }{id, b})
		}
	}
}

// exprNames are the names an mqb expression can use, for "did you mean".
var exprNames = append([]string{"payload", "meta", "message_id", "env"}, builtin.Names...)

// exprHint adds a suggestion and a pointer to the names an expression can use.
func exprHint(msg string) string {
	if name, ok := strings.CutPrefix(msg, "unknown name "); ok {
		if s := didYouMean(name, exprNames); s != "" {
			return s + " Expressions see payload (the decoded record), meta (a map of strings), message_id and env(\"NAME\")."
		}
	}
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
