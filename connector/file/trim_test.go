package file

import (
	"bytes"
	"testing"
)

// TestTrimLineEnd: the line ending is cut as bytes.TrimRight(line, "\r\n")
// cuts it.
func TestTrimLineEnd(t *testing.T) {
	for _, line := range []string{"", "\n", "\r\n", "a", "a\n", "a\r\n", "a\r\r\n", "a\n\r\n", "\r", "a\rb\n", " \n"} {
		want := bytes.TrimRight([]byte(line), "\r\n")
		if got := trimLineEnd([]byte(line)); !bytes.Equal(got, want) {
			t.Errorf("trimLineEnd(%q) = %q, want %q", line, got, want)
		}
	}
}
