package lsp

import (
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/stdlib"
)

// The outline is a token-level view of a document: every `{ … }` block,
// classified by what opened it, and the statements written directly in it.
// It is built from lang.Lex alone, which never fails, so it covers text the
// parser rejects: a half-typed `to ` line, an unclosed block.

// blockRole says what a block holds, which decides what may be written in it.
type blockRole int

const (
	roleTop    blockRole = iota // the file: route and named endpoint declarations
	roleRoute                   // a route body: settings, from, steps, handle, to
	roleKind                    // an endpoint kind's attributes (and switch/request/fanout branches)
	roleStep                    // a step's attributes (dedup, retry)
	roleBranch                  // holds `to …`: dlq, switch case/default
	roleFree                    // free `field = <expr>` pairs: map, clickhouse columns
	roleValue                   // any other block (a nested value)
)

// block is one `{ … }` of the document (or the whole file, for roleTop).
type block struct {
	role   blockRole
	name   string // route name, kind name or step name
	kind   *stdlib.Kind
	step   *stdlib.Step
	open   int // offset of "{" (-1 for the file)
	close  int // offset of the matching "}", or where the block was cut off
	parent *block
	blocks []*block
	stmts  []*stmt
	// comments holds the byte ranges of comments (on the file block only).
	comments [][2]int
}

// stmt is one item written directly in a block: its tokens at the block's
// own level (a nested block's tokens belong to the nested block).
type stmt struct {
	toks []lang.Token
	end  int // offset of the newline, comma or "}" that ends it
}

// key returns the statement's first word (`path` in `path = "a"`).
func (s *stmt) key() string {
	if len(s.toks) > 0 && s.toks[0].Type == lang.TIdent {
		return s.toks[0].Value
	}
	return ""
}

// word returns the value of token i if it is an identifier.
func (s *stmt) word(i int) string {
	if i < len(s.toks) && s.toks[i].Type == lang.TIdent {
		return s.toks[i].Value
	}
	return ""
}

func tokEnd(t lang.Token) int { return t.Pos.Offset + len(t.Value) }

// endpointKeywords are the statement keys followed by an endpoint kind.
var endpointKeywords = map[string]bool{"from": true, "to": true, "handle": true, "call": true, "forward": true}

// buildOutline scans src into its block tree.
func buildOutline(src []byte) *block {
	toks, _ := lang.Lex("", src)
	top := &block{role: roleTop, open: -1, close: len(src)}
	stack := []*block{top}
	var cur *stmt // the statement being read in the innermost block
	nest := 0     // ( and [ depth inside cur: newlines and commas do not end it
	lineStart := true
	endStmt := func(at int) {
		if cur != nil {
			cur.end = at
		}
		cur, nest = nil, 0
	}
	for i, t := range toks {
		if t.EOF() {
			break
		}
		if t.Type == lang.TComment {
			top.comments = append(top.comments, [2]int{t.Pos.Offset, tokEnd(t)})
			continue
		}
		wasLineStart := lineStart
		lineStart = t.Type == lang.TNewline
		// A declaration keyword at the start of a line starts a new
		// declaration even inside an unclosed block, as lang.Parse
		// recovers.
		if wasLineStart && len(stack) > 1 && isDeclStart(toks, i) {
			endStmt(t.Pos.Offset)
			for len(stack) > 1 {
				stack[len(stack)-1].close = t.Pos.Offset
				stack = stack[:len(stack)-1]
				parent := stack[len(stack)-1]
				if n := len(parent.stmts); n > 0 && parent.stmts[n-1].end < 0 {
					parent.stmts[n-1].end = t.Pos.Offset
				}
			}
		}
		b := stack[len(stack)-1]
		switch {
		case t.Type == lang.TNewline && nest == 0, t.Type == lang.TPunct && t.Value == "," && nest == 0:
			endStmt(t.Pos.Offset)
			continue
		case t.Type == lang.TNewline:
			continue
		case t.Type == lang.TPunct && t.Value == "{":
			child := &block{open: t.Pos.Offset, close: len(src), parent: b}
			classify(child, b, cur)
			b.blocks = append(b.blocks, child)
			stack = append(stack, child)
			cur, nest = nil, 0
			continue
		case t.Type == lang.TPunct && t.Value == "}":
			if len(stack) == 1 {
				continue // a stray brace
			}
			endStmt(t.Pos.Offset)
			b.close = t.Pos.Offset
			stack = stack[:len(stack)-1]
			// The statement that opened the block ends with it.
			parent := stack[len(stack)-1]
			if n := len(parent.stmts); n > 0 && parent.stmts[n-1].end < 0 {
				parent.stmts[n-1].end = t.Pos.Offset
			}
			continue
		case t.Type == lang.TPunct && (t.Value == "(" || t.Value == "["):
			nest++
		case t.Type == lang.TPunct && (t.Value == ")" || t.Value == "]"):
			nest = max(nest-1, 0)
		}
		if cur == nil {
			cur = &stmt{end: -1}
			b.stmts = append(b.stmts, cur)
		}
		cur.toks = append(cur.toks, t)
	}
	// Statements and blocks still open end at the end of the file.
	var closeAll func(b *block)
	closeAll = func(b *block) {
		for _, s := range b.stmts {
			if s.end < 0 {
				s.end = len(src)
			}
		}
		for _, c := range b.blocks {
			closeAll(c)
		}
	}
	closeAll(top)
	return top
}

func isDeclStart(toks []lang.Token, i int) bool {
	t := toks[i]
	if t.Type != lang.TIdent || (t.Value != "route" && t.Value != "output" && t.Value != "input") {
		return false
	}
	return i+1 < len(toks) && toks[i+1].Type == lang.TIdent
}

// classify decides what the block b, opened at the end of statement s in
// parent, holds.
func classify(b, parent *block, s *stmt) {
	b.role = roleValue
	if s == nil {
		return
	}
	n := len(s.toks)
	switch {
	case parent.role == roleTop && s.key() == "route" && n == 2:
		b.role, b.name = roleRoute, s.word(1)
	case parent.role == roleTop && (s.key() == "output" || s.key() == "input") && n == 4:
		setKind(b, s.word(3))
	case n >= 2 && endpointKeywords[s.word(n-2)] && s.word(n-1) != "":
		// `from file {`, and `dlq { to kind {` or `case "x" { to kind {`.
		setKind(b, s.word(n-1))
	case n == 1 && s.key() != "":
		key := s.key()
		if parent.role == roleKind && parent.name == "switch" && key == "default" {
			b.role, b.name = roleBranch, key
			return
		}
		if parent.role != roleRoute {
			return
		}
		st, ok := stdlib.LookupStep(key)
		if !ok {
			return
		}
		b.name, b.step = key, st
		switch {
		case st.Nested:
			b.role = roleBranch
		case st.Free:
			b.role = roleFree
		default:
			b.role = roleStep
		}
	case n >= 2 && s.word(n-2) == "case" && parent.name == "switch" && (s.toks[n-1].Type == lang.TString || s.toks[n-1].Type == lang.TRaw):
		// `case "x" {`, also at the end of `on = <expr>  case "x" {`
		// written on one line.
		b.role, b.name = roleBranch, "case"
	case n == 2 && s.toks[1].Value == "=":
		if a := parent.attr(s.key()); a != nil && a.Type == stdlib.Block {
			b.role, b.name = roleFree, a.Name
		}
	}
}

func setKind(b *block, name string) {
	b.role, b.name = roleKind, name
	if k, ok := stdlib.LookupKind(name); ok {
		b.kind = k
	}
}

// attr returns the declared attribute key of the block's kind or step, or
// the route setting key in a route body.
func (b *block) attr(key string) *stdlib.Attr {
	switch {
	case b.kind != nil:
		return b.kind.Attr(key)
	case b.step != nil:
		return b.step.Attr(key)
	case b.role == roleRoute:
		for i := range stdlib.Settings {
			if stdlib.Settings[i].Name == key {
				return &stdlib.Settings[i]
			}
		}
	}
	return nil
}

// innermost returns the deepest block whose inside holds off.
func (b *block) innermost(off int) *block {
	for _, c := range b.blocks {
		if c.open < off && off <= c.close {
			return c.innermost(off)
		}
	}
	return b
}

// stmtAt returns the statement of b that off is in (at or before its end),
// or nil when off starts a new statement.
func (b *block) stmtAt(off int) *stmt {
	for _, s := range b.stmts {
		if len(s.toks) > 0 && s.toks[0].Pos.Offset < off && off <= s.end {
			return s
		}
	}
	return nil
}

// tokenAt finds the token under off anywhere in the tree: its block, its
// statement and its index there. A position just after a word counts as on
// it, as editors place the cursor there.
func (b *block) tokenAt(off int) (*block, *stmt, int) {
	in := b.innermost(off)
	for _, blk := range []*block{in, in.parent} {
		if blk == nil {
			continue
		}
		for _, s := range blk.stmts {
			for i, t := range s.toks {
				if t.Pos.Offset <= off && off < tokEnd(t) {
					return blk, s, i
				}
			}
		}
	}
	// Just after a word: the cursor sits at its end.
	for _, blk := range []*block{in, in.parent} {
		if blk == nil {
			continue
		}
		for _, s := range blk.stmts {
			for i, t := range s.toks {
				if t.Type == lang.TIdent && off == tokEnd(t) {
					return blk, s, i
				}
			}
		}
	}
	return nil, nil, -1
}

// keysSet lists the keys written in b, leaving out the statement skip (the
// one being typed).
func (b *block) keysSet(skip *stmt) map[string]bool {
	out := map[string]bool{}
	for _, s := range b.stmts {
		if s != skip && s.key() != "" {
			out[s.key()] = true
		}
	}
	return out
}

// inComment reports whether off is inside a comment (or at the end of one:
// a comment runs to the end of its line).
func (b *block) inComment(off int) bool {
	for _, c := range b.comments {
		if c[0] < off && off <= c[1] {
			return true
		}
	}
	return false
}
