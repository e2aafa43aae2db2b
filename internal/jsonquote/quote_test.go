package jsonquote

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppend holds Append to json.Marshal of the same string, for a
// string and for its bytes.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&</a>", "\b\f\n\r\t\x00\x1f\x7f",
		"é 日本 \u2028 \u2029", "\xff\xfe", "\xe2\x80", "\xe2\x80\xa8", "a\xc3\x28b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("Append(%q) = %s, want x%s", s, got, want)
		}
		if got := Append(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("Append([]byte(%q)) = %s, want %s", s, got, want)
		}
	})
}
