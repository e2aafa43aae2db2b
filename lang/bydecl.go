package lang

import "github.com/mqb-dev/mqb/diag"

// parseByDecl is the parse of a file that holds no syntax error, made a
// declaration at a time: it lexes up to the line that starts the next
// declaration (where splitDecls cuts), parses what it lexed and reuses
// the token array for the next one. A file of many routes then never
// holds all its tokens at once (10,000 generated routes lex into some
// 750,000 tokens of 64 bytes). Each declaration is checked (checkDecl)
// as soon as it is parsed. The declarations, comments, token count and
// diagnostics (the lexer's, then the checks') are those of one parse of
// the whole file and checkDecls (TestParseByDeclMatchesWholeParse; the
// caller has only to dedupe and clamp them): a declaration's parse never reads
// past its closing brace, and the last one ends at the file's own EOF
// token, trailing blanks included.
//
// ok is false when a declaration does not parse on its own or the lexer
// reached maxTokens (0: no bound): the caller then parses the whole file,
// which reports the error as it always has (a cut inside an unclosed
// block, say, reads differently there).
func parseByDecl(filename string, src []byte, maxTokens int) (f *File, diags diag.List, ok bool) {
	l := &lexState{src: string(src), pos: Position{Filename: filename, Line: 1, Column: 1}, max: maxTokens}
	l.toks = make([]Token, 0, 512)
	f = &File{Name: filename, Src: src}
	var chunk []Token    // the declaration parsed, with its EOF token
	var p parser         // its spare states serve every declaration
	var checks diag.List // checkDecl's, after the lexer's as checkDecls has them
	// parse parses toks[:end] ended by eof and drops them from toks.
	parse := func(end int, eof Token) bool {
		chunk = append(append(chunk[:0], l.toks[:end]...), eof)
		for _, t := range chunk {
			if t.Type == TComment {
				f.Comments = append(f.Comments, t)
			}
		}
		decls, err := p.parse(chunk)
		if err != nil {
			return false
		}
		// The checks checkDecls makes, made while the declaration's
		// tree is still in the cache (walking the whole file's trees
		// after its parse was a fifth of the parse's time).
		for _, d := range decls {
			checkDecl(f.Src, d, &checks)
		}
		f.Decls = append(f.Decls, decls...)
		f.Tokens += end
		l.handed += end
		l.toks = l.toks[:copy(l.toks, l.toks[end:])]
		return true
	}
	// next is the first token not yet looked at as a declaration's start;
	// lineStart says whether it starts a line (splitDecls's rule).
	next, lineStart := 0, true
	for l.step() {
		// A token is looked at once the one after it is lexed: a
		// declaration starts with a keyword followed by a name.
		for ; next+1 < len(l.toks); next++ {
			if lineStart && next > 0 && isDeclStart(l.toks, next) {
				last := l.toks[next-1]
				eof := last.Pos
				advance(&eof, last.Value)
				if !parse(next, eofToken(eof)) {
					return nil, nil, false
				}
				next = 0
			}
			t := l.toks[next].Type
			lineStart = t == TNewline || (lineStart && t == TComment)
		}
	}
	if l.over || !parse(len(l.toks), eofToken(l.pos)) {
		return nil, nil, false
	}
	f.Tokens++ // the EOF token
	return f, append(l.diags, checks...), true
}
