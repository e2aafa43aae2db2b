package compiler

import (
	"fmt"
	"strconv"
	"strings"
)

// sqlDialect is the SQL spoken by a sql sink, read from its url's scheme.
// sqlAnyDialect is used when the scheme is only known at run time: the
// analyser then accepts a form only where every dialect reads it alike, and
// a function only when it is on every dialect's allow-list.
type sqlDialect int

const (
	sqlAnyDialect sqlDialect = iota
	sqlSQLite
	sqlPostgres
	sqlMySQL
)

func (d sqlDialect) String() string {
	switch d {
	case sqlSQLite:
		return "SQLite"
	case sqlPostgres:
		return "PostgreSQL"
	case sqlMySQL:
		return "MySQL/MariaDB"
	}
	return "SQL"
}

// dialectOf reads the dialect from a sql url's scheme.
func dialectOf(url string) sqlDialect {
	u := strings.ToLower(strings.TrimSpace(url))
	switch {
	case strings.HasPrefix(u, "sqlite:"):
		return sqlSQLite
	case strings.HasPrefix(u, "postgres:"), strings.HasPrefix(u, "postgresql:"):
		return sqlPostgres
	case strings.HasPrefix(u, "mysql:"):
		return sqlMySQL
	}
	return sqlAnyDialect
}

type sqlTokKind int

const (
	tEOF    sqlTokKind = iota
	tIdent             // a bare word: keyword or name (text as written)
	tQIdent            // a quoted identifier: text without the quotes
	tString            // a string literal: text without the quotes
	tNumber
	tParam // a ${…} placeholder: num is its index in the template's parts
	tPunct // ( ) , ; . * and operators
)

type sqlTok struct {
	kind sqlTokKind
	text string
	num  int
}

func (t sqlTok) is(word string) bool {
	return t.kind == tIdent && strings.EqualFold(t.text, word)
}

func (t sqlTok) punct(p string) bool { return t.kind == tPunct && t.text == p }

func (t sqlTok) String() string {
	switch t.kind {
	case tEOF:
		return "the end of the statement"
	case tString:
		return "'" + t.text + "'"
	case tQIdent:
		return `"` + t.text + `"`
	case tParam:
		return "a ${…} placeholder"
	}
	return t.text
}

// sqlLexError is a statement mqb refuses to read at all; quotedParam marks
// a ${…} placeholder written inside SQL quotes, which is a build error.
type sqlLexError struct {
	msg string
	// quotedParam: the placeholder sits inside where (a string literal, a
	// quoted identifier or a comment); fragment is that piece of skeleton.
	quotedParam     bool
	where, fragment string
}

func (e *sqlLexError) Error() string { return e.msg }

// lexSQL splits a statement skeleton (placeholders as \x01N\x02, see
// skeleton) into tokens. Comments are dropped; string literals and quoted
// identifiers are opaque. A placeholder inside quotes or a comment is an
// error: it would be sent as text, not bound. So is a marker byte that is
// not part of a whole marker (checkMarkers).
func lexSQL(s string, d sqlDialect) ([]sqlTok, error) {
	if err := checkMarkers(s); err != nil {
		return nil, err
	}
	// A statement runs some five bytes a token.
	out := make([]sqlTok, 0, len(s)/5+4)
	i := 0
	quotedParam := func(what string, body string) error {
		return &sqlLexError{quotedParam: true, where: what, fragment: body,
			msg: fmt.Sprintf("a ${…} placeholder sits inside %s (%s), where it is not a bound parameter", what, strings.TrimSpace(placeholderText(body)))}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(s[i:], "--") || (c == '#' && d == sqlMySQL):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				j = len(s) - i
			}
			if strings.IndexByte(s[i:i+j], '\x01') >= 0 {
				return nil, quotedParam("an SQL comment", s[i:i+j])
			}
			i += j
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return nil, &sqlLexError{msg: "a /* comment is not closed"}
			}
			if strings.IndexByte(s[i:i+j+4], '\x01') >= 0 {
				return nil, quotedParam("an SQL comment", s[i:i+j+4])
			}
			if d == sqlMySQL && strings.HasPrefix(s[i:], "/*!") {
				return nil, &sqlLexError{msg: "a MySQL executable comment /*! … */ runs as SQL"}
			}
			i += j + 4
		case c == '\x01':
			// Whole, by checkMarkers: \x01, digits, \x02.
			j := strings.IndexByte(s[i:], '\x02')
			n, err := strconv.Atoi(s[i+1 : i+j])
			if j < 2 || err != nil {
				return nil, &sqlLexError{msg: "a placeholder marker is malformed"}
			}
			out = append(out, sqlTok{kind: tParam, num: n})
			i += j + 1
		case c == '\'' || (c == '"' && d == sqlMySQL):
			body, n, err := quoted(s[i:], c, d == sqlMySQL)
			if err != nil {
				return nil, err
			}
			if strings.IndexByte(body, '\x01') >= 0 {
				return nil, quotedParam("an SQL string literal", s[i:i+n])
			}
			out = append(out, sqlTok{kind: tString, text: body})
			i += n
		case c == '"' || c == '`' || (c == '[' && d == sqlSQLite):
			end := c
			if c == '[' {
				end = ']'
			}
			j := strings.IndexByte(s[i+1:], end)
			if j < 0 {
				return nil, &sqlLexError{msg: "a quoted identifier is not closed"}
			}
			body := s[i+1 : i+1+j]
			if strings.IndexByte(body, '\x01') >= 0 {
				return nil, quotedParam("a quoted SQL identifier", s[i:i+j+2])
			}
			out = append(out, sqlTok{kind: tQIdent, text: body})
			i += j + 2
		case c == '$' && d != sqlMySQL && i+1 < len(s) && (s[i+1] == '$' || s[i+1] >= '0' && s[i+1] <= '9' || isIdentStart(s[i+1])):
			// A PostgreSQL dollar-quoted string, or a $1 parameter written by
			// hand: neither is something the analyser reads.
			return nil, &sqlLexError{msg: "a $-quoted string or $n parameter is not something mqb reads; bind values with ${…}"}
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && (isIdentStart(s[j]) || s[j] >= '0' && s[j] <= '9' || s[j] == '$') {
				j++
			}
			out = append(out, sqlTok{kind: tIdent, text: s[i:j]})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
				(s[j] == '+' || s[j] == '-') && j > i && (s[j-1] == 'e' || s[j-1] == 'E')) {
				j++
			}
			out = append(out, sqlTok{kind: tNumber, text: s[i:j]})
			i = j
		default:
			op := ""
			for _, p := range []string{"||", "::", "<=", ">=", "<>", "!=", "==", "->>", "->"} {
				if strings.HasPrefix(s[i:], p) {
					op = p
					break
				}
			}
			if op == "" {
				if !strings.ContainsRune("(),;.*=<>+-/%", rune(c)) {
					return nil, &sqlLexError{msg: fmt.Sprintf("%q is not a character mqb reads in SQL", c)}
				}
				op = string(c)
			}
			out = append(out, sqlTok{kind: tPunct, text: op})
			i += len(op)
		}
	}
	return append(out, sqlTok{kind: tEOF}), nil
}

// maxMarkerDigits bounds a marker's number: a template has far fewer
// parts, and strconv.Atoi reads it without overflow.
const maxMarkerDigits = 9

// checkMarkers refuses a statement in which a marker byte (\x01 or \x02)
// is not part of a whole marker \x01N\x02: a lone one, one whose digits
// are missing, too many or not closed. skeleton writes only whole markers
// and refuses a literal holding a marker byte, so this is a statement mqb
// did not make (create_table, read as written) or a bug: it is unreadable,
// never a crash, and never a placeholder.
func checkMarkers(s string) error {
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], "\x01\x02")
		if j < 0 {
			return nil
		}
		i += j
		if s[i] == '\x02' {
			return &sqlLexError{msg: "it holds a U+0002 control character, which is not SQL mqb reads"}
		}
		k := i + 1
		for k < len(s) && k-i-1 < maxMarkerDigits+1 && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k == i+1 || k-i-1 > maxMarkerDigits || k >= len(s) || s[k] != '\x02' {
			return &sqlLexError{msg: "it holds a U+0001 control character, which is not SQL mqb reads"}
		}
		i = k + 1
	}
	return nil
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

// quoted reads a literal opened by q at s[0]: a doubled quote escapes it,
// and in MySQL so does a backslash. It returns the body and the length
// read, quotes included.
func quoted(s string, q byte, backslash bool) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case backslash && s[i] == '\\' && i+1 < len(s):
			b.WriteByte(s[i+1])
			i++
		case s[i] == q && i+1 < len(s) && s[i+1] == q:
			b.WriteByte(q)
			i++
		case s[i] == q:
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, &sqlLexError{msg: "a string literal is not closed"}
}

// placeholderText shows a skeleton fragment with its markers as ${…}.
func placeholderText(s string) string {
	return placeholderRE().ReplaceAllString(s, "${…}")
}
