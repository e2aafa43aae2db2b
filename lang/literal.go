package lang

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/diag"
)

// ParseDuration parses 500ms, 1h30m, 2d (a day is 24h).
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	rest := s
	for rest != "" {
		i := 0
		for i < len(rest) && (isDigit(rest[i]) || rest[i] == '.' || rest[i] == '_') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		num := strings.ReplaceAll(rest[:i], "_", "")
		rest = rest[i:]
		j := 0
		for j < len(rest) && !isDigit(rest[j]) {
			j++
		}
		unit := rest[:j]
		rest = rest[j:]
		var mult time.Duration
		switch unit {
		case "ns":
			mult = time.Nanosecond
		case "us", "µs":
			mult = time.Microsecond
		case "ms":
			mult = time.Millisecond
		case "s":
			mult = time.Second
		case "m":
			mult = time.Minute
		case "h":
			mult = time.Hour
		case "d":
			mult = 24 * time.Hour
		default:
			return 0, fmt.Errorf("invalid duration %q: unknown unit %q", s, unit)
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		total += time.Duration(f * float64(mult))
	}
	return total, nil
}

// ParseInt parses an Int token's text (decimal, 0x hex, _ separators).
func ParseInt(s string) (int64, error) {
	return strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
}

// TemplatePart is literal text or one ${…} placeholder of a string.
type TemplatePart struct {
	Lit string
	// Expr is the placeholder's expression, with the mq-bridge aliases
	// ${payload:f} and ${metadata:k} rewritten to payload.f and meta["k"].
	Expr string
	// Written is the placeholder as the user wrote it, without ${ }.
	Written string
	Range   diag.Range
}

// IsExpr reports whether the part is a placeholder.
func (p TemplatePart) IsExpr() bool { return p.Written != "" || p.Expr != "" }

// SplitTemplate decodes a String or Raw token into literal text and ${…}
// placeholders. A string with no placeholder yields one literal part.
func SplitTemplate(tok Token) ([]TemplatePart, diag.List) {
	var diags diag.List
	raw := tok.Type == TRaw
	body, bodyOff := stringBody(tok)
	if strings.IndexByte(body, '$') < 0 && (raw || strings.IndexByte(body, '\\') < 0) {
		// No placeholder and nothing to unescape (most strings): the
		// body is the one literal part, without a copy.
		return []TemplatePart{{Lit: body}}, nil
	}
	parts := make([]TemplatePart, 0, 2*strings.Count(body, "${")+1)
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, TemplatePart{Lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\' && !raw && i+1 < len(body):
			r, n, err := unescape(body[i:])
			if err != nil {
				at := advancePos(tok.Pos, tok.Value[:bodyOff+i])
				diags.Add("E002", diag.Range{Start: at, End: shift(at, n)}, err.Error(), `Escapes are \" \\ \n \t \r \$ and \uXXXX.`)
			}
			lit.WriteString(r)
			i += n
		case c == '$' && i+1 < len(body) && body[i+1] == '{':
			n, ok := scanPlaceholder(body[i:])
			at := advancePos(tok.Pos, tok.Value[:bodyOff+i])
			rng := diag.Range{Start: at, End: shift(at, n)}
			if !ok {
				diags.Add("E021", rng, "unterminated ${ placeholder", "Close it with }.")
				lit.WriteString(body[i:])
				i = len(body)
				continue
			}
			written := body[i+2 : i+n-1]
			if !raw {
				written = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(written)
			}
			flush()
			inner := shift(at, 2)
			parts = append(parts, TemplatePart{Expr: NormalizePlaceholder(written), Written: written, Range: diag.Range{Start: inner, End: shift(at, n-1)}})
			i += n
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	if len(parts) == 0 {
		parts = []TemplatePart{{Lit: ""}}
	}
	return parts, diags
}

// NormalizePlaceholder rewrites mq-bridge's ${payload:a.b} and
// ${metadata:key} spellings to expr-lang.
func NormalizePlaceholder(s string) string {
	t := strings.TrimSpace(s)
	if f, ok := strings.CutPrefix(t, "payload:"); ok && f != "" && !strings.ContainsAny(f, " ()[]\"'") {
		return "payload." + f
	}
	if k, ok := strings.CutPrefix(t, "metadata:"); ok && k != "" {
		return "meta[" + strconv.Quote(k) + "]"
	}
	return t
}

// StringValue decodes a String or Raw token with no placeholders allowed
// to matter: placeholders are kept as written.
func StringValue(tok Token) string {
	parts, _ := SplitTemplate(tok)
	var b strings.Builder
	for _, p := range parts {
		if p.IsExpr() {
			b.WriteString("${" + p.Written + "}")
		} else {
			b.WriteString(p.Lit)
		}
	}
	return b.String()
}

// stringBody returns the text between the quotes and its offset in the token.
func stringBody(tok Token) (string, int) {
	v := tok.Value
	if tok.Type == TRaw {
		body := strings.TrimPrefix(v, `"""`)
		body = strings.TrimSuffix(body, `"""`)
		off := 3
		if strings.HasPrefix(body, "\n") {
			body, off = body[1:], 4
		} else if strings.HasPrefix(body, "\r\n") {
			body, off = body[2:], 5
		}
		return body, off
	}
	if len(v) >= 2 && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1], 1
	}
	return v[1:], 1
}

func unescape(s string) (string, int, error) {
	switch s[1] {
	case '"', '\\', '\'', '$':
		return s[1:2], 2, nil
	case 'n':
		return "\n", 2, nil
	case 't':
		return "\t", 2, nil
	case 'r':
		return "\r", 2, nil
	case 'u':
		if len(s) >= 6 {
			if r, err := strconv.ParseUint(s[2:6], 16, 32); err == nil {
				return string(rune(r)), 6, nil
			}
		}
		return "", 2, fmt.Errorf(`invalid \u escape: want four hex digits`)
	}
	return s[1:2], 2, fmt.Errorf("unknown escape \\%c", s[1])
}

func advancePos(p Position, s string) diag.Pos {
	advance(&p, s)
	return posOf(p)
}

func shift(p diag.Pos, n int) diag.Pos {
	p.Col += n
	p.Offset += n
	return p
}
