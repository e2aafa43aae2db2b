package diag

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteTextCaret(t *testing.T) {
	src := Sources{"a.mqb": []byte("route r {\n  x = \"é\" pth = 1\n}\n")}
	// "pth" starts at byte column 12 (é is two bytes) and is 3 bytes long.
	l := List{{Severity: Error, Code: "E013", Summary: "unknown attribute \"pth\"", Detail: "did you mean \"path\"?",
		Range: Range{Start: Pos{File: "a.mqb", Line: 2, Col: 12, Offset: 21}, End: Pos{File: "a.mqb", Line: 2, Col: 15, Offset: 24}}}}
	var b bytes.Buffer
	WriteText(&b, l, src)
	want := "a.mqb:2:12: error[E013]: unknown attribute \"pth\"\n" +
		" 2 |   x = \"é\" pth = 1\n" +
		"   |           ^^^\n" +
		"  = did you mean \"path\"?\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestWriteTextOutOfLine covers ranges that point past their line: the
// parser reports "unexpected end of file" one column after the last byte of
// a file that ends before its closing `}`, which used to panic the renderer.
func TestWriteTextOutOfLine(t *testing.T) {
	pos := func(line, col int) Pos { return Pos{File: "a.mqb", Line: line, Col: col} }
	for _, tc := range []struct {
		name       string
		src        string
		start, end Pos
		want       string // the two quoted lines, or "" when the line is absent
	}{
		{"eof after last byte, no newline", "route r {\n  to file { path = \"b\"", pos(2, 23), pos(2, 23),
			" 2 |   to file { path = \"b\"\n   |                       ^\n"},
		{"eof on the empty last line", "route r {\n", pos(2, 1), pos(2, 1),
			" 2 | \n   | ^\n"},
		{"end far past the line", "abc\n", pos(1, 2), pos(1, 99),
			" 1 | abc\n   |  ^^\n"},
		{"start far past the line", "abc\n", pos(1, 40), pos(1, 45),
			" 1 | abc\n   |    ^\n"},
		{"end before start", "abcdef\n", pos(1, 4), pos(1, 2),
			" 1 | abcdef\n   |    ^\n"},
		{"column zero", "abc\n", pos(1, 0), pos(1, 0),
			" 1 | abc\n   | ^\n"},
		{"negative column", "abc\n", pos(1, -5), pos(1, -1),
			" 1 | abc\n   | ^\n"},
		{"crlf line end", "abc\r\n", pos(1, 4), pos(1, 5),
			" 1 | abc\n   |    ^\n"},
		{"inside a multibyte rune", "é€x\n", pos(1, 2), pos(1, 4),
			" 1 | é€x\n   | ^^\n"},
		{"line past the end of the file", "abc\n", pos(7, 1), pos(7, 2), ""},
		{"line zero", "abc\n", pos(0, 1), pos(0, 2), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := List{{Severity: Error, Code: "E001", Summary: "s", Range: Range{Start: tc.start, End: tc.end}}}
			var b bytes.Buffer
			WriteText(&b, l, Sources{"a.mqb": []byte(tc.src)})
			head := tc.start.String() + ": error[E001]: s\n"
			if got := b.String(); got != head+tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, head+tc.want)
			}
		})
	}
}

// FuzzRender renders one diagnostic at an arbitrary range of arbitrary
// source: it must never panic, and when it quotes a line the caret line
// under it holds only spaces and at least one caret, no wider than the
// quoted line plus one.
func FuzzRender(f *testing.F) {
	f.Add([]byte("route r {\n  to file { path = \"b\""), 2, 23, 2, 23)
	f.Add([]byte("route r {\n"), 2, 1, 2, 1)
	f.Add([]byte("route r {\n  x = \"é\" pth = 1\n}\n"), 2, 12, 2, 15)
	f.Add([]byte("a\tb\r\n\xff\xfe\n"), 2, 1, 2, 3)
	f.Add([]byte(""), 1, 1, 1, 1)
	f.Add([]byte("abc"), 1, -3, 3, 100)
	f.Fuzz(func(t *testing.T, src []byte, line, col, endLine, endCol int) {
		l := List{{Severity: Error, Code: "E001", Summary: "s", Detail: "d",
			Range: Range{Start: Pos{File: "f.mqb", Line: line, Col: col}, End: Pos{File: "f.mqb", Line: endLine, Col: endCol}}}}
		var b bytes.Buffer
		WriteText(&b, l, Sources{"f.mqb": src})
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		if !strings.HasPrefix(lines[0], l[0].Range.Start.String()+": error[E001]: s") {
			t.Fatalf("header %q", lines[0])
		}
		if lines[len(lines)-1] != "  = d" {
			t.Fatalf("detail line %q", lines[len(lines)-1])
		}
		if len(lines) == 2 {
			return // no line quoted
		}
		if len(lines) != 4 {
			t.Fatalf("want header, quoted line, caret line, detail; got %q", b.String())
		}
		quoted := lines[1][strings.Index(lines[1], "| ")+2:]
		caret := lines[2][strings.Index(lines[2], "| ")+2:]
		if strings.Trim(caret, " ^") != "" || !strings.Contains(caret, "^") {
			t.Fatalf("caret line %q", lines[2])
		}
		if n := len([]rune(caret)); n > len([]rune(quoted))+1 {
			t.Fatalf("caret line %q wider than quoted line %q", caret, quoted)
		}
	})
}
