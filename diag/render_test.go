package diag

import (
	"bytes"
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
