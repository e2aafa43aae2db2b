package lang

import (
	"strings"
	"unicode/utf8"

	"github.com/mqb-dev/mqb/diag"
)

// MaxInlineWidth is the longest line a one-line block may produce; a longer
// one is split into one item per line.
const MaxInlineWidth = 100

// Format returns the canonical layout of a .mqb file. A file with syntax
// errors is not formatted: Format returns nil and the diagnostics.
//
// The canonical layout:
//
//   - two spaces of indentation per block depth;
//   - one item per line: items written on one line with commas are split,
//     except that a block written on one line in the source stays on one
//     line, as `{ a = 1, b = "x" }`, when the resulting line fits in
//     MaxInlineWidth columns (a route body is always split);
//   - `key = value` with single spaces, the `=` aligned across a run of
//     consecutive attributes (a blank line or another kind of item ends
//     the run);
//   - one blank line between top-level declarations; blank lines inside
//     blocks are kept, several collapsed into one, none after `{` or
//     before `}`;
//   - every comment is kept: own-line comments at the indentation of what
//     follows them, trailing comments two spaces after their line, aligned
//     across consecutive lines of one block that all carry one;
//   - strings, raw blocks and expressions are reproduced byte for byte;
//     a list written on one line becomes `[a, b]`, a longer one holds one
//     element per line with a trailing comma.
func Format(filename string, src []byte) ([]byte, diag.List) {
	file, diags := Parse(filename, src)
	if diags.HasErrors() {
		return nil, diags
	}
	toks, _ := Lex(filename, src)
	f := newFormatter(src, toks)
	f.file(file)
	return f.render(), nil
}

type outLine struct {
	depth   int
	text    string
	comment string
	blank   bool // a blank line precedes this one
}

type formatter struct {
	src   []byte
	toks  []Token
	at    map[int]int // token offset → index (non-EOF tokens)
	endAt map[int]int // offset just past a token → index
	match map[int]int // bracket index → partner index
	done  []bool      // comment tokens already written
	next  int         // first token index whose comments may not be written yet
	lines []outLine

	atStart    bool // no element written yet in the current block
	forceBlank bool // the next element gets a blank line (top level)
}

func newFormatter(src []byte, toks []Token) *formatter {
	f := &formatter{src: src, toks: toks, at: map[int]int{}, endAt: map[int]int{}, match: map[int]int{}, done: make([]bool, len(toks)), atStart: true}
	var stack []int
	for i, t := range toks {
		if t.EOF() {
			continue
		}
		f.at[t.Pos.Offset] = i
		f.endAt[t.Pos.Offset+len(t.Value)] = i
		if t.Type != TPunct {
			continue
		}
		switch t.Value {
		case "{", "[", "(":
			stack = append(stack, i)
		case "}", "]", ")":
			if n := len(stack); n > 0 {
				f.match[stack[n-1]] = i
				f.match[i] = stack[n-1]
				stack = stack[:n-1]
			}
		}
	}
	return f
}

// tok returns the index of the token starting at p.
func (f *formatter) tok(p Position) int {
	if i, ok := f.at[p.Offset]; ok {
		return i
	}
	return -1
}

// blankBefore reports whether the source has an empty line right before
// token i (separators between do not count).
func (f *formatter) blankBefore(i int) bool {
	nl := 0
	for j := i - 1; j >= 0; j-- {
		t := f.toks[j]
		if t.Type == TNewline {
			nl++
		} else if !(t.Type == TPunct && t.Value == ",") {
			break
		}
	}
	return nl >= 2
}

// emit appends one output line. first is the index of the source token the
// line starts with (-1 for a closing line): it decides the blank line
// before. last is the index of the line's last source token: a comment
// right after it on its source line becomes the line's trailing comment.
func (f *formatter) emit(depth int, text string, first, last int) {
	l := outLine{depth: depth, text: text}
	if first >= 0 && !f.atStart {
		l.blank = f.forceBlank || f.blankBefore(first)
	}
	if first >= 0 {
		f.atStart = false
		f.forceBlank = false
		// A comment inside the line's source span (between a key and an
		// '=' or '{' written on a later line) goes on its own line above.
		for i := first + 1; i < last; i++ {
			if f.toks[i].Type == TComment && !f.done[i] {
				f.done[i] = true
				f.lines = append(f.lines, outLine{depth: depth, text: commentText(f.toks[i]), blank: l.blank})
				l.blank = false
			}
		}
	}
	if last >= 0 {
		j := last + 1
		for j < len(f.toks) && f.toks[j].Type == TPunct && f.toks[j].Value == "," {
			j++
		}
		if j < len(f.toks) && f.toks[j].Type == TComment && !f.done[j] {
			l.comment = commentText(f.toks[j])
			f.done[j] = true
		}
	}
	f.lines = append(f.lines, l)
}

// flush writes, as own-line comments, every comment before token index
// before that is not written yet.
func (f *formatter) flush(before, depth int) {
	for ; f.next < before && f.next < len(f.toks); f.next++ {
		i := f.next
		if f.toks[i].Type != TComment || f.done[i] {
			continue
		}
		f.done[i] = true
		l := outLine{depth: depth, text: commentText(f.toks[i])}
		if !f.atStart {
			l.blank = f.forceBlank || f.blankBefore(i)
		}
		f.atStart = false
		f.forceBlank = false
		f.lines = append(f.lines, l)
	}
}

func commentText(t Token) string { return strings.TrimRight(t.Value, " \t\r") }

func (f *formatter) file(file *File) {
	for _, d := range file.Decls {
		var pos Position
		switch {
		case d.Route != nil:
			pos = d.Route.Pos
		case d.Endpoint != nil:
			pos = d.Endpoint.Pos
		}
		first := f.tok(pos)
		f.flush(first, 0)
		if !f.atStart && !f.forceBlank {
			// A comment directly above a declaration stays attached to it.
			f.forceBlank = f.blankBefore(first)
		}
		switch {
		case d.Route != nil:
			f.block(0, "route "+d.Route.Name.Name+" ", "", d.Route.Body, first, true)
		case d.Endpoint != nil:
			e := d.Endpoint
			f.block(0, e.Dir+" "+e.Name.Name+" = "+e.Kind.Name+" ", "", e.Body, first, false)
		}
		f.forceBlank = true
	}
	f.flush(len(f.toks), 0)
}

// block writes prefix + the block + suffix starting at depth.
func (f *formatter) block(depth int, prefix, suffix string, b *Block, first int, split bool) {
	open := f.tok(b.Pos)
	closing, ok := f.match[open]
	if open < 0 || !ok {
		// Cannot happen for a parsed file; keep the source as written.
		f.emit(depth, prefix+string(f.src[b.Pos.Offset:b.EndPos.Offset])+suffix, first, -1)
		return
	}
	items := b.Items()
	if !split && f.toks[open].Pos.Line == f.toks[closing].Pos.Line {
		line := strings.Repeat("  ", depth) + prefix + f.inlineBlock(b) + suffix
		if len(items) == 0 || utf8.RuneCountInString(line) <= MaxInlineWidth {
			f.emit(depth, prefix+f.inlineBlock(b)+suffix, first, closing)
			return
		}
	}
	if len(items) == 0 && !f.hasComment(open, closing) {
		f.emit(depth, prefix+"{}"+suffix, first, closing)
		return
	}
	f.emit(depth, prefix+"{", first, open)
	f.atStart = true
	pads := f.keyPads(items)
	for i, it := range items {
		itFirst := f.tok(it.Key.Pos)
		f.flush(itFirst, depth+1)
		if i+1 < len(items) && joinsNext(it, items[i+1]) {
			// A bare key followed on the next line by `ref x` or `y { … }`
			// would read back as one item (newlines do not separate
			// there): the comma keeps them apart.
			f.emit(depth+1, it.KeyText()+",", itFirst, f.keyLast(it))
			continue
		}
		f.item(depth+1, it, pads[i], itFirst)
	}
	f.flush(closing, depth+1)
	f.emit(depth, "}"+suffix, -1, closing)
	f.atStart = false
}

func (f *formatter) hasComment(from, to int) bool {
	for i := from; i < to; i++ {
		if f.toks[i].Type == TComment {
			return true
		}
	}
	return false
}

// keyPads returns, per item, the width its key is padded to: attributes in
// one run share the width of the run's longest key.
func (f *formatter) keyPads(items []*Item) []int {
	pads := make([]int, len(items))
	start := 0
	for start < len(items) {
		if items[start].Assign == nil {
			start++
			continue
		}
		end := start + 1
		for end < len(items) && items[end].Assign != nil && !f.blankBetween(items[end-1], items[end]) {
			end++
		}
		w := 0
		for _, it := range items[start:end] {
			w = max(w, utf8.RuneCountInString(it.KeyText()))
		}
		for i := start; i < end; i++ {
			pads[i] = w
		}
		start = end
	}
	return pads
}

// blankBetween reports whether the output has a blank line between two
// consecutive items (before the second or before a comment between them).
func (f *formatter) blankBetween(a, b *Item) bool {
	from, to := f.tok(a.Key.Pos), f.tok(b.Key.Pos)
	for i := from + 1; i <= to; i++ {
		ownLine := f.toks[i].Type == TComment && f.toks[i-1].Type == TNewline
		if (i == to || ownLine) && f.blankBefore(i) {
			return true
		}
	}
	return false
}

// joinsNext reports whether it, a key alone, would read back joined with
// next written on the following line: as `it ref x` when next is `ref x`,
// or as `it y { … }` when next is `y { … }`.
func joinsNext(it, next *Item) bool {
	bare := it.Ref == nil && it.Assign == nil && it.Body == nil && it.Arg == nil && it.Del == nil && it.Unnest == nil
	return bare && (next.Key.Name == "ref" || next.Body != nil && next.Kind == nil && next.Label == nil)
}

func (f *formatter) item(depth int, it *Item, pad, first int) {
	key := it.KeyText()
	switch {
	case it.Ref != nil:
		f.emit(depth, key+" ref "+it.Ref.Name, first, f.tok(it.Ref.Pos))
	case it.Assign != nil:
		f.value(depth, key+strings.Repeat(" ", pad-utf8.RuneCountInString(key))+" = ", "", it.Assign, first)
	case it.Body != nil:
		head := key + " "
		if it.Kind != nil {
			head += it.Kind.Name + " "
		}
		if it.Label != nil {
			head += it.Label.Raw + " "
		}
		f.block(depth, head, "", it.Body, first, false)
	case it.Del != nil:
		f.emit(depth, key+" "+it.Del.Text(), first, f.endAt[it.Del.EndPos.Offset])
	case it.Unnest != nil:
		f.emit(depth, key+" "+it.Unnest.Text(), first, f.endAt[it.Unnest.EndPos.Offset])
	case it.Arg != nil:
		f.emit(depth, key+" "+f.expr(it.Arg), first, f.tok(it.Arg.Tokens[len(it.Arg.Tokens)-1].Pos))
	default:
		f.emit(depth, key, first, f.keyLast(it))
	}
}

// keyLast is the index of the last token of the item's key, its path
// included.
func (f *formatter) keyLast(it *Item) int {
	if it.Path == nil {
		return f.tok(it.Key.Pos)
	}
	if i, ok := f.endAt[it.Path.EndPos.Offset]; ok {
		return i
	}
	return f.tok(it.Key.Pos)
}

// expr returns the expression as written and marks the comments inside it
// (a multi-line expression in parentheses may hold some) as written.
func (f *formatter) expr(e *Expr) string {
	from, to := f.tok(e.Tokens[0].Pos), f.tok(e.Tokens[len(e.Tokens)-1].Pos)
	for i := from; i >= 0 && i <= to; i++ {
		if f.toks[i].Type == TComment {
			f.done[i] = true
		}
	}
	return e.Text(f.src)
}

func (f *formatter) value(depth int, prefix, suffix string, v *Value, first int) {
	switch {
	case v.Block != nil:
		f.block(depth, prefix, suffix, v.Block, first, false)
	case v.List != nil:
		f.list(depth, prefix, suffix, v.List, first)
	case v.Expr != nil:
		f.emit(depth, prefix+f.expr(v.Expr)+suffix, first, f.tok(v.Expr.Tokens[len(v.Expr.Tokens)-1].Pos))
	}
}

func (f *formatter) list(depth int, prefix, suffix string, l *List, first int) {
	open := f.tok(l.Pos)
	closing, ok := f.match[open]
	if open < 0 || !ok {
		f.emit(depth, prefix+string(f.src[l.Pos.Offset:l.EndPos.Offset])+suffix, first, -1)
		return
	}
	if f.toks[open].Pos.Line == f.toks[closing].Pos.Line || len(l.Elems) == 0 && !f.hasComment(open, closing) {
		f.emit(depth, prefix+f.inlineList(l)+suffix, first, closing)
		return
	}
	f.emit(depth, prefix+"[", first, open)
	f.atStart = true
	for _, e := range l.Elems {
		ef := f.tok(valuePos(e))
		f.flush(ef, depth+1)
		f.value(depth+1, "", ",", e, ef)
	}
	f.flush(closing, depth+1)
	f.emit(depth, "]"+suffix, -1, closing)
	f.atStart = false
}

func valuePos(v *Value) Position {
	switch {
	case v.Block != nil:
		return v.Block.Pos
	case v.List != nil:
		return v.List.Pos
	case v.Expr != nil:
		return v.Expr.Pos
	}
	return v.Pos
}

func (f *formatter) inlineBlock(b *Block) string {
	items := b.Items()
	if len(items) == 0 {
		return "{}"
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = f.inlineItem(it)
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

func (f *formatter) inlineItem(it *Item) string {
	key := it.KeyText()
	switch {
	case it.Ref != nil:
		return key + " ref " + it.Ref.Name
	case it.Assign != nil:
		return key + " = " + f.inlineValue(it.Assign)
	case it.Body != nil:
		head := key + " "
		if it.Kind != nil {
			head += it.Kind.Name + " "
		}
		if it.Label != nil {
			head += it.Label.Raw + " "
		}
		return head + f.inlineBlock(it.Body)
	case it.Del != nil:
		return key + " " + it.Del.Text()
	case it.Unnest != nil:
		return key + " " + it.Unnest.Text()
	case it.Arg != nil:
		return key + " " + f.expr(it.Arg)
	}
	return key
}

func (f *formatter) inlineValue(v *Value) string {
	switch {
	case v.Block != nil:
		return f.inlineBlock(v.Block)
	case v.List != nil:
		return f.inlineList(v.List)
	case v.Expr != nil:
		return f.expr(v.Expr)
	}
	return ""
}

func (f *formatter) inlineList(l *List) string {
	parts := make([]string, len(l.Elems))
	for i, e := range l.Elems {
		parts[i] = f.inlineValue(e)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// render joins the lines, aligning trailing comments across consecutive
// lines of one depth that all carry one.
func (f *formatter) render() []byte {
	var b strings.Builder
	lines := f.lines
	for i := 0; i < len(lines); {
		j := i + 1
		if lines[i].comment != "" && !strings.Contains(lines[i].text, "\n") {
			for j < len(lines) && lines[j].comment != "" && !lines[j].blank && lines[j].depth == lines[i].depth && !strings.Contains(lines[j].text, "\n") {
				j++
			}
		}
		w := 0
		for _, l := range lines[i:j] {
			w = max(w, utf8.RuneCountInString(l.text))
		}
		for _, l := range lines[i:j] {
			if l.blank {
				b.WriteByte('\n')
			}
			b.WriteString(strings.Repeat("  ", l.depth))
			b.WriteString(l.text)
			if l.comment != "" {
				pad := 2
				if !strings.Contains(l.text, "\n") {
					pad += w - utf8.RuneCountInString(l.text)
				}
				b.WriteString(strings.Repeat(" ", pad))
				b.WriteString(l.comment)
			}
			b.WriteByte('\n')
		}
		i = j
	}
	return []byte(b.String())
}
