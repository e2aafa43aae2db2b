package lang

import (
	"strings"
	"unicode/utf8"

	"github.com/mqb-dev/mqb/diag"
)

// Token types produced by the lexer.
const (
	TEOF      TokenType = -1
	TNewline  TokenType = iota + 1 // "\n"
	TComment                       // # … or // …
	TIdent                         // route, payload, order_id
	TInt                           // 42, 0x1f, 1_000
	TFloat                         // 1.5, 1e3
	TDuration                      // 500ms, 1h30m
	TString                        // "…" or '…' (may hold ${…})
	TRaw                           // """…"""
	TOp                            // == != <= >= && || ?? ?. .. ** + - * / % < > ! ? : . | ^ =
	TPunct                         // { } [ ] ( ) ,
)

var symbols = map[string]TokenType{
	"EOF": TEOF, "NL": TNewline, "Comment": TComment, "Ident": TIdent, "Int": TInt,
	"Float": TFloat, "Duration": TDuration, "String": TString, "Raw": TRaw,
	"Op": TOp, "Punct": TPunct,
}

// TokenName returns the grammar name of a token type.
func TokenName(t TokenType) string {
	for k, v := range symbols {
		if v == t {
			return k
		}
	}
	return "?"
}

// Lex splits src into tokens, ending with an EOF token. It never fails:
// malformed input is reported as diagnostics and lexed as well as possible.
func Lex(filename string, src []byte) ([]Token, diag.List) {
	toks, diags, _ := lexWithin(filename, src, 0)
	return toks, diags
}

// lexWithin is Lex stopping once tokens and lexical errors together reach
// maxTokens (0: no bound); over reports that it stopped there.
func lexWithin(filename string, src []byte, maxTokens int) (toks []Token, diags diag.List, over bool) {
	l := &lexState{src: string(src), pos: Position{Filename: filename, Line: 1, Column: 1}, max: maxTokens}
	// A generated file runs about 7 bytes a token, a commented one more:
	// one byte in six reserves enough for most files without the third of
	// the array a byte in four left unused.
	n := len(src)/6 + 16
	if maxTokens > 0 {
		n = min(n, maxTokens+1)
	}
	l.toks = make([]Token, 0, n)
	l.run()
	return l.toks, l.diags, l.over
}

type lexState struct {
	src   string
	pos   Position
	toks  []Token
	diags diag.List
	max   int  // bound on handed+len(toks)+len(diags); 0: none
	over  bool // stopped at max
	// handed counts the tokens already handed to the parser and dropped
	// from toks (parseByDecl), which the bound counts too.
	handed int
}

func (l *lexState) errorf(code string, at Position, width int, format string, args ...any) {
	start := posOf(at)
	end := start
	end.Col += width
	end.Offset += width
	l.diags.Addf(code, diag.Range{Start: start, End: end}, format, args...)
}

// emit appends a token of n bytes starting at the current position.
func (l *lexState) emit(t TokenType, n int) {
	v := l.src[l.pos.Offset : l.pos.Offset+n]
	l.toks = append(l.toks, Token{Type: t, Value: v, Pos: l.pos})
	l.advance(v)
}

func (l *lexState) advance(s string) { advance(&l.pos, s) }

// advance moves p over s. Columns count bytes, as diag.Pos documents
// ; renderers convert to
// display columns, the LSP to UTF-16.
func advance(p *Position, s string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			p.Line++
			p.Column = 1
		} else {
			p.Column++
		}
	}
	p.Offset += len(s)
}

var multiOps = []string{"==", "!=", "<=", ">=", "&&", "||", "??", "?.", "..", "**"}

func (l *lexState) run() {
	for l.step() {
	}
	l.toks = append(l.toks, eofToken(l.pos))
}

// step lexes what starts at the current position: a token, blanks, or a
// character it reports. It returns false, having lexed nothing, at the
// end of the source or at the bound (then over is set).
func (l *lexState) step() bool {
	if l.pos.Offset >= len(l.src) {
		return false
	}
	if l.max > 0 && l.handed+len(l.toks)+len(l.diags) >= l.max {
		l.over = true
		return false
	}
	rest := l.src[l.pos.Offset:]
	c := rest[0]
	switch {
	case c == ' ' || c == '\t' || c == '\r':
		n := 1
		for n < len(rest) && (rest[n] == ' ' || rest[n] == '\t' || rest[n] == '\r') {
			n++
		}
		l.advance(rest[:n])
	case c == '\n':
		l.emit(TNewline, 1)
	case c == '#' || strings.HasPrefix(rest, "//"):
		n := strings.IndexByte(rest, '\n')
		if n < 0 {
			n = len(rest)
		}
		l.emit(TComment, n)
	case strings.HasPrefix(rest, `"""`):
		l.raw(rest)
	case c == '"' || c == '\'':
		l.str(rest, c)
	case isDigit(c):
		l.number(rest)
	case isIdentStart(c):
		n := 1
		for n < len(rest) && isIdentPart(rest[n]) {
			n++
		}
		l.emit(TIdent, n)
	case strings.IndexByte("{}[](),", c) >= 0:
		l.emit(TPunct, 1)
	case strings.IndexByte("=!<>&|?.+-*/%:^", c) >= 0:
		n := 1
		for _, op := range multiOps {
			if strings.HasPrefix(rest, op) {
				n = 2
				break
			}
		}
		if c == '&' && n == 1 {
			l.errorf("E001", l.pos, 1, "unexpected character %q (did you mean \"&&\"?)", "&")
			l.advance(rest[:1])
			return true
		}
		l.emit(TOp, n)
	default:
		r, size := utf8.DecodeRuneInString(rest)
		if r == utf8.RuneError && size <= 1 {
			l.errorf("E001", l.pos, 1, "invalid UTF-8 byte 0x%02x", rest[0])
			l.advance(rest[:1])
			return true
		}
		l.errorf("E001", l.pos, 1, "unexpected character %q", r)
		l.advance(rest[:size])
	}
	return true
}

func (l *lexState) raw(rest string) {
	end := strings.Index(rest[3:], `"""`)
	if end < 0 {
		l.errorf("E002", l.pos, 3, `unterminated raw block: no closing """`)
		l.emit(TRaw, len(rest))
		return
	}
	l.emit(TRaw, end+6)
}

// str lexes a quoted string. A ${…} placeholder may hold nested quotes and
// braces: "${meta["mqb.id"]}" is one string.
func (l *lexState) str(rest string, quote byte) {
	n, ok := scanString(rest, quote)
	if !ok {
		l.errorf("E002", l.pos, 1, "unterminated string: add a closing %c on the same line", quote)
	}
	l.emit(TString, n)
}

// scanString returns the length of the quoted string at the start of s and
// whether it was terminated. It stops at a newline outside a placeholder.
func scanString(s string, quote byte) (int, bool) {
	i := 1
	for i < len(s) {
		switch c := s[i]; {
		case c == '\\':
			i += 2
		case c == quote:
			return i + 1, true
		case c == '\n':
			return i, false
		case c == '$' && i+1 < len(s) && s[i+1] == '{':
			n, ok := scanPlaceholder(s[i:])
			if !ok {
				return i + n, false
			}
			i += n
		default:
			i++
		}
	}
	return min(i, len(s)), false
}

// scanPlaceholder returns the length of the ${…} at the start of s,
// counting nested braces and skipping quoted strings inside it.
func scanPlaceholder(s string) (int, bool) {
	depth := 0
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		case '"', '\'':
			n, ok := scanString(s[i:], c)
			if !ok {
				return i + n, false
			}
			i += n - 1
		case '\n':
			return i, false
		}
	}
	return len(s), false
}

func (l *lexState) number(rest string) {
	n := 0
	isFloat := false
	if strings.HasPrefix(rest, "0x") || strings.HasPrefix(rest, "0X") {
		n = 2
		for n < len(rest) && (isHex(rest[n]) || rest[n] == '_') {
			n++
		}
		l.emit(TInt, n)
		return
	}
	for n < len(rest) && (isDigit(rest[n]) || rest[n] == '_') {
		n++
	}
	if n+1 < len(rest) && rest[n] == '.' && isDigit(rest[n+1]) {
		isFloat = true
		n++
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
	}
	if n < len(rest) && (rest[n] == 'e' || rest[n] == 'E') {
		m := n + 1
		if m < len(rest) && (rest[m] == '+' || rest[m] == '-') {
			m++
		}
		if m < len(rest) && isDigit(rest[m]) {
			for m < len(rest) && isDigit(rest[m]) {
				m++
			}
			l.emit(TFloat, m)
			return
		}
	}
	if n < len(rest) && (isIdentStart(rest[n]) || strings.HasPrefix(rest[n:], "µ")) {
		// A duration: one or more <number><unit> groups, e.g. 1h30m.
		m := n
		for m < len(rest) && (isIdentPart(rest[m]) || rest[m] == '.' && m+1 < len(rest) && isDigit(rest[m+1]) || strings.HasPrefix(rest[m:], "µ")) {
			if strings.HasPrefix(rest[m:], "µ") {
				m += len("µ")
				continue
			}
			m++
		}
		if _, err := ParseDuration(rest[:m]); err != nil {
			l.errorf("E002", l.pos, m, "invalid duration %q: use a number followed by ns, us, ms, s, m, h or d (e.g. 500ms, 1h30m)", rest[:m])
		}
		l.emit(TDuration, m)
		return
	}
	if isFloat {
		l.emit(TFloat, n)
		return
	}
	l.emit(TInt, n)
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isHex(c byte) bool        { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// posOf converts a token position to a diag position.
func posOf(p Position) diag.Pos {
	return diag.Pos{File: p.Filename, Line: p.Line, Col: p.Column, Offset: p.Offset}
}
