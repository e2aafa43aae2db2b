package lang

import (
	"slices"
	"strings"
	"testing"
)

// TestValueOnLaterLine checks that a list written one element per line is a
// List (not an opaque expression), that a value may start on the line after
// '=', and that a statement's argument still ends at its line.
func TestValueOnLaterLine(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"elements on their own lines", "[\n    \"x\",\n    \"y\",\n  ]", `= [ - String:"x" - String:"y"`},
		{"newline after comma", "[\"x\",\n \"y\"]", `= [ - String:"x" - String:"y"`},
		{"comments between elements", "[ # c\n 1, # d\n 2\n]", `= [ - Int:1 - Int:2`},
		{"value on the next line", "\n    5", `= Int:5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "route r {\n  tags = " + tt.value + "\n  keep\n  to ref o\n}\n"
			f, diags := Parse("t.mqb", []byte(src))
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			got := strings.Join(strings.Fields(DumpAST(f)), " ")
			want := "route r tags " + tt.want + " keep to ref o"
			if got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestKindOnNextLine checks that `word` then `name { … }` on the next line
// are two items (the grammar skips newlines between tokens, so the parser alone
// reads `word name { … }`).
func TestKindOnNextLine(t *testing.T) {
	tests := []struct{ name, body, want, diag string }{
		{"bare word then block", "keep\n  dedup { ttl = 1h }", "keep dedup { ttl = Duration:1h", ""},
		{"same line stays a kind", "from file { path = \"a\" }", `from kind file { path = String:"a"`, ""},
		{"fuzz case", "A,A{}", "A A {", ""},
		{"label on next line", "case\n  \"x\" { }", `case label "x" {`, "a label must be on the same line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, diags := Parse("t.mqb", []byte("route r {\n  "+tt.body+"\n}\n"))
			if tt.diag == "" && len(diags) > 0 || tt.diag != "" && (len(diags) != 1 || !strings.Contains(diags[0].Summary, tt.diag)) {
				t.Fatalf("diags = %v, want %q", diags, tt.diag)
			}
			got := strings.Join(strings.Fields(DumpAST(f)), " ")
			if want := "route r " + tt.want; got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

// TestEachItem: EachItem yields what Items returns, commas left out, and
// stops when the loop does.
func TestEachItem(t *testing.T) {
	f, diags := Parse("t.mqb", []byte("route r {\n  from file { path = \"a\", mode = consume, }\n  id payload.x\n  to stdout {}\n}\n"))
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	for _, b := range []*Block{f.Decls[0].Route.Body, f.Decls[0].Route.Body.Items()[0].Body, nil} {
		var got []*Item
		for it := range b.EachItem() {
			got = append(got, it)
		}
		if want := b.Items(); !slices.Equal(got, want) {
			t.Errorf("EachItem yielded %d items, Items returns %d", len(got), len(want))
		}
	}
	n := 0
	for range f.Decls[0].Route.Body.EachItem() {
		n++
		break
	}
	if n != 1 {
		t.Errorf("the loop ran %d times after a break", n)
	}
}
