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
			// Columns are bytes; the caret goes under characters.
			from := min(max(d.Range.Start.Col, 1)-1, len(line))
			to := from + 1
			if d.Range.End.Line == d.Range.Start.Line && d.Range.End.Col > d.Range.Start.Col {
				to = min(d.Range.End.Col-1, len(line))
			}
			indent := utf8.RuneCountInString(line[:from])
			width := max(utf8.RuneCountInString(line[from:max(to, from)]), 1)
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
