package sql

import (
	"bytes"
	"io"
	"testing"
)

// copyReader yields the same COPY text whatever size its reader asks
// for: every live row once, in order, escaped; the rows not live left out.
func TestCopyReader(t *testing.T) {
	rows := [][][]byte{
		{[]byte("a"), nil, []byte("tab\there")},
		{[]byte("skipped"), nil, nil},
		{[]byte(`back\slash`), []byte(""), []byte("new\nline\rcr")},
		{bytes.Repeat([]byte("x"), 100), []byte("1"), []byte("plain")},
	}
	live := []int{0, 2, 3}
	want := "a\t\\N\ttab\\there\n" + `back\\slash` + "\t\tnew\\nline\\rcr\n" + string(bytes.Repeat([]byte("x"), 100)) + "\t1\tplain\n"
	for _, size := range []int{1, 7, 64, 65531} {
		r := &copyReader{rows: rows, live: live}
		var got bytes.Buffer
		p := make([]byte, size)
		for {
			n, err := r.Read(p)
			got.Write(p[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatalf("read size %d: no progress", size)
			}
		}
		if got.String() != want {
			t.Errorf("read size %d:\n%q\nwant\n%q", size, got.String(), want)
		}
	}
}
