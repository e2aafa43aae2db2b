package diag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Sources maps a file name to its text, so rendering can quote the line.
type Sources map[string][]byte

// WriteText renders every diagnostic as
//
//	file:line:col: error[E012]: summary
//	   3 |   to sqll {
//	     |      ^^^^
//	  = detail
func WriteText(w io.Writer, l List, src Sources) {
	for _, d := range l {
		fmt.Fprintf(w, "%s: %s[%s]: %s\n", d.Range.Start, d.Severity, d.Code, d.Summary)
		if line, ok := sourceLine(src[d.Range.Start.File], d.Range.Start.Line); ok {
			num := fmt.Sprint(d.Range.Start.Line)
			pad := strings.Repeat(" ", len(num))
			fmt.Fprintf(w, " %s | %s\n", num, strings.ReplaceAll(line, "\t", " "))
			from, to := caretSpan(d.Range, len(line))
			// Columns are bytes; the caret goes under characters. A position
			// past the end of the line (an unclosed block at end of file)
			// puts one caret just after the last character.
			indent, width := runeColumns(line, from, to)
			fmt.Fprintf(w, " %s | %s%s\n", pad, strings.Repeat(" ", indent), strings.Repeat("^", width))
		}
		if d.Detail != "" {
			fmt.Fprintf(w, "  = %s\n", d.Detail)
		}
	}
}

// WriteJSON renders the list as one JSON array.
func WriteJSON(w io.Writer, l List) error {
	if l == nil {
		l = List{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(l)
}

// caretSpan returns the byte span [from, to) of a line of n bytes that the
// caret underlines: clamped to the line whatever the range says, since a
// range can point past the end of its line (end of file) or past the end
// of the file (a diagnostic about a file that changed since).
func caretSpan(r Range, n int) (from, to int) {
	from = min(max(r.Start.Col, 1)-1, n)
	to = from + 1
	if r.End.Line == r.Start.Line && r.End.Col > r.Start.Col {
		to = r.End.Col - 1
	}
	return from, min(max(to, from), n)
}

// runeColumns turns the byte span [from, to) of line into the caret's
// indent and width in characters, decoding the line once from its start
// so that both count the characters a terminal shows, even where the span
// starts or ends inside one or the line holds invalid UTF-8: the indent is
// the characters that end at or before from, the width those that start
// before to, less the indent (at least one).
func runeColumns(line string, from, to int) (indent, width int) {
	indent = -1
	n := 0
	for i := 0; i < len(line) && i < to; n++ {
		_, size := utf8.DecodeRuneInString(line[i:])
		if indent < 0 && i+size > from {
			indent = n // the character holding from's byte
		}
		i += size
	}
	if indent < 0 {
		indent = n
	}
	return indent, max(n-indent, 1)
}

func sourceLine(src []byte, n int) (string, bool) {
	if src == nil || n < 1 {
		return "", false
	}
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src, '\n')
		if j < 0 {
			return "", false
		}
		src = src[j+1:]
	}
	if j := bytes.IndexByte(src, '\n'); j >= 0 {
		src = src[:j]
	}
	return strings.TrimRight(string(src), "\r"), true
}
