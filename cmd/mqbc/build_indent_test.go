package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestBuildIndent: `mqbc build -o` writes the plan compact, on one line,
// and --indent writes the same plan indented, for people; both redacted.
func TestBuildIndent(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "orders.mqb", goodSrc)
	plans := map[string]any{}
	for _, tt := range []struct {
		file  string
		args  []string
		lines int // lines of the file: 1, or at least this many
	}{
		{"compact.json", nil, 1},
		{"indented.json", []string{"--indent"}, 20},
	} {
		args := append([]string{"build", "orders.mqb", "-o", tt.file}, tt.args...)
		if _, errs, code := mqbc(t, dir, args...); code != exitOK {
			t.Fatalf("mqbc %v: exit %d\n%s", args, code, errs)
		}
		b, err := os.ReadFile(filepath.Join(dir, tt.file))
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if (tt.lines == 1 && n != 1) || n < tt.lines {
			t.Errorf("%s has %d lines, want %d", tt.file, n, tt.lines)
		}
		if bytes.Contains(b, []byte("hunter2")) {
			t.Errorf("%s holds the password", tt.file)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		plans[tt.file] = v
	}
	if !reflect.DeepEqual(plans["compact.json"], plans["indented.json"]) {
		t.Errorf("the compact and the indented plan differ")
	}
}

// TestBlockBuffer: text written to a blockBuffer, as strings and as
// bytes, across its blocks' bounds, comes out whole and in order.
func TestBlockBuffer(t *testing.T) {
	var b blockBuffer
	var want strings.Builder
	piece := strings.Repeat("0123456789abcdef", textBlock/16/3+1) // three and a bit a block
	for i := range 8 {
		s := piece[:len(piece)-i]
		if i%2 == 0 {
			_, _ = b.WriteString(s)
		} else {
			_, _ = b.Write([]byte(s))
		}
		want.WriteString(s)
	}
	var got strings.Builder
	if _, err := b.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("wrote %d bytes, read back %d, not the same", want.Len(), got.Len())
	}
	if len(b.blocks) < 2 {
		t.Fatalf("%d blocks: the test does not cross a block's bound", len(b.blocks))
	}
}
