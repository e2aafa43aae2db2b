package lang

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/diag"
)

// Parse parses one .mqb file within DefaultLimits. It always returns a File
// holding every declaration that parsed; the list holds every lexical and
// syntax error.
func Parse(filename string, src []byte) (*File, diag.List) {
	return ParseWithin(filename, src, DefaultLimits)
}

func parseTokensOf(filename string, src []byte, toks []Token, diags diag.List) (*File, diag.List) {
	f := &File{Name: filename, Src: src, Tokens: len(toks)}
	for _, t := range toks {
		if t.Type == TComment {
			f.Comments = append(f.Comments, t)
		}
	}
	decls, err := parseDeclTokens(toks)
	if err == nil {
		f.Decls = decls
	} else {
		// Recover: parse each top-level declaration on its own, so one
		// broken route does not hide the errors (or the checks) of the rest.
		for _, chunk := range splitDecls(toks) {
			decls, err := parseDeclTokens(chunk)
			if err != nil {
				d := syntaxError(err)
				caseWithSeveralValues(chunk, &d)
				end := chunk[len(chunk)-1].Pos
				switch {
				case d.Range.Start.Offset == end.Offset && end.Offset < len(src):
					d.Summary = `a block is not closed: expected "}" before the next declaration`
				case d.Range.Start.Offset >= len(src) && strings.HasSuffix(d.Summary, `(expected "}")`):
					d.Summary = `the file ends before a block is closed: expected "}"`
				}
				diags = append(diags, d)
				continue
			}
			f.Decls = append(f.Decls, decls...)
		}
	}
	return checkDecls(f, diags)
}

// checkDecls runs the checks the grammar leaves out over f's declarations
// and returns f with diags and what they add.
func checkDecls(f *File, diags diag.List) (*File, diag.List) {
	for _, d := range f.Decls {
		checkDecl(f.Src, d, &diags)
	}
	return checked(f, diags)
}

// checkDecl runs the checks the grammar leaves out over one declaration
// of a file whose text is src.
func checkDecl(src []byte, d *Decl, diags *diag.List) {
	splitKindOnNextLine(d, diags)
	checkSeparators(src, d, diags)
	checkPaths(d, diags)
}

// checked is f with its checked diagnostics, each once and within the
// file.
func checked(f *File, diags diag.List) (*File, diag.List) {
	return f, clampRanges(dedupe(diags), len(f.Src))
}

// splitKindOnNextLine undoes a parse the elided newlines allow but nobody
// means: a bare word followed by `name { … }` on the next line reads as one
// item `word name { … }`. It becomes the two items written; a label on the
// next line (`word` then `"x" { … }`) is an error.
func splitKindOnNextLine(d *Decl, diags *diag.List) {
	var b *Block
	switch {
	case d.Route != nil:
		b = d.Route.Body
	case d.Endpoint != nil:
		b = d.Endpoint.Body
	}
	walkBlocks(b, func(b *Block) {
		for i := 0; i < len(b.Entries); i++ {
			it := b.Entries[i].Item
			if it == nil || it.Body == nil {
				continue
			}
			keyEnd := it.Key.EndPos
			if it.Path != nil {
				keyEnd = it.Path.EndPos
			}
			if it.Label != nil && it.Label.Pos.Line > keyEnd.Line {
				diags.Add("E001", it.Label.Range(), "a label must be on the same line as its key", "Write `key \"label\" { … }` on one line.")
			}
			if it.Kind == nil || it.Kind.Pos.Line <= keyEnd.Line {
				continue
			}
			bare := &Item{Pos: it.Pos, EndPos: keyEnd, Key: it.Key, Path: it.Path}
			block := &Item{Pos: it.Kind.Pos, EndPos: it.EndPos, Key: it.Kind, Body: it.Body}
			b.Entries[i].Item = bare
			b.Entries = append(b.Entries[:i+1], append([]*BlockEntry{{Item: block}}, b.Entries[i+1:]...)...)
		}
	})
}

// checkPaths reports the malformed segments of key paths (`payload.`
// with no name, `meta["k"` with no "]").
func checkPaths(d *Decl, diags *diag.List) {
	walkBlocks(declBody(d), func(b *Block) {
		for it := range b.EachItem() {
			if it.Path == nil {
				continue
			}
			for _, s := range it.Path.Segments {
				if s.Bad != "" {
					diags.Add("E001", Range(s.Pos, s.EndPos), s.Bad, "A path names fields one by one: payload.customer.email, meta[\"k\"], payload[\"a b\"].")
				}
			}
		}
	})
}

func declBody(d *Decl) *Block {
	switch {
	case d.Route != nil:
		return d.Route.Body
	case d.Endpoint != nil:
		return d.Endpoint.Body
	}
	return nil
}

// clampRanges keeps every range inside the n-byte input: an error at end
// of file would otherwise end one byte past it.
func clampRanges(l diag.List, n int) diag.List {
	for i := range l {
		r := &l[i].Range
		for _, p := range []*diag.Pos{&r.Start, &r.End} {
			if p.Offset > n {
				p.Col -= p.Offset - n
				p.Offset = n
			}
			p.Col = max(p.Col, 1)
		}
		if r.End.Offset < r.Start.Offset {
			r.End = r.Start
		}
	}
	return l
}

// splitDecls cuts the token stream at every line that starts, at brace
// depth 0, with a declaration keyword; each chunk ends with an EOF token.
func splitDecls(toks []Token) [][]Token {
	var chunks [][]Token
	start, depth := 0, 0
	lineStart := true
	for i, t := range toks {
		if t.EOF() {
			break
		}
		// A declaration keyword followed by a name at the start of a line
		// starts a new chunk even inside an unclosed block: an unclosed
		// brace is the commonest mistake, and it must not swallow the
		// routes after it.
		if lineStart && isDeclStart(toks, i) && i > start {
			chunks = append(chunks, withEOF(toks[start:i]))
			start = i
			depth = 0
		}
		switch {
		case t.Type == TPunct && t.Value == "{":
			depth++
		case t.Type == TPunct && t.Value == "}":
			depth--
		}
		lineStart = t.Type == TNewline || (lineStart && t.Type == TComment)
	}
	end := len(toks) - 1
	if end > start {
		chunks = append(chunks, withEOF(toks[start:end]))
	}
	return chunks
}

func isDeclStart(toks []Token, i int) bool {
	t := toks[i]
	if t.Type != TIdent || (t.Value != "route" && t.Value != "output" && t.Value != "input") {
		return false
	}
	return i+1 < len(toks) && toks[i+1].Type == TIdent
}

func withEOF(toks []Token) []Token {
	out := make([]Token, len(toks), len(toks)+1)
	copy(out, toks)
	last := toks[len(toks)-1]
	pos := last.Pos
	advance(&pos, last.Value)
	return append(out, eofToken(pos))
}

// caseWithSeveralValues rewrites the syntax error of `case "DE", "FR" { … }`
// (the parser stops at the second value) into what is wrong: a switch case
// matches one value. The range covers the values.
func caseWithSeveralValues(toks []Token, d *diag.Diagnostic) {
	i := slices.IndexFunc(toks, func(t Token) bool { return t.Pos.Offset == d.Range.Start.Offset })
	if i < 0 || !isCaseValue(toks[i]) {
		return
	}
	first := i
	for first >= 2 && isPunct(toks[first-1], ",") && isCaseValue(toks[first-2]) {
		first -= 2
	}
	if first == i || first < 1 || toks[first-1].Type != TIdent || toks[first-1].Value != "case" {
		return
	}
	last := i
	for last+2 < len(toks) && isPunct(toks[last+1], ",") && isCaseValue(toks[last+2]) {
		last += 2
	}
	end := toks[last].Pos
	advance(&end, toks[last].Value)
	d.Range = diag.Range{Start: posOf(toks[first].Pos), End: posOf(end)}
	d.Summary = "a case takes one value; write one case per value"
	d.Detail = fmt.Sprintf("Write `case %s { … }` and `case %s { … }`, each with its target; a named output (`output NAME = kind { … }`, then `to ref NAME`) saves writing the target twice.", toks[first].Value, toks[first+2].Value)
}

// isCaseValue: a case's value is a string (`case "DE" { … }`).
func isCaseValue(t Token) bool { return t.Type == TString }

func isPunct(t Token, v string) bool { return t.Type == TPunct && t.Value == v }

func syntaxError(err *syntaxErr) diag.Diagnostic {
	pos := posOf(err.Position())
	end := pos
	end.Col++
	end.Offset++
	return diag.Diagnostic{Severity: diag.Error, Code: "E001", Summary: friendlyMessage(err.Message()), Range: diag.Range{Start: pos, End: end}}
}

// friendlyMessage rewrites the grammar's token names into words a user knows.
func friendlyMessage(m string) string {
	r := strings.NewReplacer(
		`"\n"`, "end of line", `<nl>`, "end of line", `<ident>`, "a name", `<string>`, "a string",
		`<raw>`, "a raw block", `<eof>`, "end of file", `"<EOF>"`, "end of file",
	)
	m = r.Replace(m)
	return strings.TrimSuffix(m, ".")
}

// checkSeparators reports two items written on one line with no comma.
func checkSeparators(src []byte, d *Decl, diags *diag.List) {
	var b *Block
	switch {
	case d.Route != nil:
		b = d.Route.Body
	case d.Endpoint != nil:
		b = d.Endpoint.Body
	}
	walkBlocks(b, func(b *Block) {
		// Two attributes on one line need a comma between them
		// (`a = 1 b = 2` is almost always a typo). A nested block or a
		// case may follow an attribute directly, as in DESIGN's
		// `to switch { on = <expr>  case "x" { … }  default { … } }`.
		var prev *Item
		for _, e := range b.Entries {
			if e.Item == nil {
				prev = nil
				continue
			}
			if prev != nil && (prev.Assign != nil || prev.Del != nil) && (e.Item.Assign != nil || e.Item.Del != nil) && !newlineBetween(src, prev, e.Item) {
				diags.Add("E001", e.Item.KeyRange(), fmt.Sprintf("expected a newline or a comma before %q", e.Item.KeyText()), "Attributes in a block are separated by newlines or commas.")
			}
			prev = e.Item
		}
	})
}

// newlineBetween reports whether a newline separates two items.
func newlineBetween(src []byte, a, b *Item) bool {
	from, to := a.Pos.Offset, b.Pos.Offset
	if from < 0 || to > len(src) || from > to {
		return true
	}
	return bytes.IndexByte(src[from:to], '\n') >= 0
}

// walkBlocks calls fn for b and every block nested in it.
func walkBlocks(b *Block, fn func(*Block)) {
	if b == nil {
		return
	}
	fn(b)
	for it := range b.EachItem() {
		walkBlocks(it.Body, fn)
		if it.Assign != nil {
			walkValueBlocks(it.Assign, fn)
		}
	}
}

func walkValueBlocks(v *Value, fn func(*Block)) {
	switch {
	case v.Block != nil:
		walkBlocks(v.Block, fn)
	case v.List != nil:
		for _, e := range v.List.Elems {
			walkValueBlocks(e, fn)
		}
	}
}

// dedupe drops repeated diagnostics at the same position with the same text
// (the lexer and a recovered parse can report one mistake twice).
func dedupe(l diag.List) diag.List {
	seen := map[string]bool{}
	out := l[:0]
	for _, d := range l {
		k := fmt.Sprint(d.Range.Start.Offset, d.Code, d.Summary)
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}
