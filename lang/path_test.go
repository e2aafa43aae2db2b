package lang

import (
	"strings"
	"testing"
)

// TestParsePaths checks the map targets: a key written as a path, `del`
// with a path, and `=` followed by an expr-lang map literal; and that the
// forms around them still read as before.
func TestParsePaths(t *testing.T) {
	tests := []struct{ name, item, want string }{
		{"nested path", "payload.customer.email = lower(payload.email)", `payload.customer.email = Ident:lower Punct:( Ident:payload Op:. Ident:email Punct:)`},
		{"indexed meta", `meta["k"] = payload.k`, `meta["k"] = Ident:payload Op:. Ident:k`},
		{"indexed then dotted", `payload["a b"].c = 1`, `payload["a b"].c = Int:1`},
		{"space before dot", "payload .a = 1", `payload.a = Int:1`},
		{"bare field", "total = payload.a + payload.b", `total = Ident:payload Op:. Ident:a Op:+ Ident:payload Op:. Ident:b`},
		{"del", "del payload.tmp", `del del payload.tmp`},
		{"del nested indexed", `del payload.a["x"].b`, `del del payload.a["x"].b`},
		{"del meta", `del meta["k"]`, `del del meta["k"]`},
		{"del not a path stays an argument", "del payload.a + 1", `del arg Ident:payload Op:. Ident:a Op:+ Int:1`},
		{"a field named del", "del = 1", `del = Int:1`},
		{"quoted map literal", `payload = {"line": payload}`, `payload = Punct:{ String:"line" Op:: Ident:payload Punct:}`},
		{"bare-key map literal", `payload = {line: payload}`, `payload = Punct:{ Ident:line Op:: Ident:payload Punct:}`},
		{"map literal after an operator", `payload = payload ?? {"a": 1}`, `payload = Ident:payload Op:?? Punct:{ String:"a" Op:: Int:1 Punct:}`},
		{"empty block stays a block", `payload = {}`, `payload = {`},
		{"a list argument is not a path", `id ["a"]`, `id arg Punct:[ String:"a" Punct:]`},
		{"an indexed argument is not a path", `id meta["a"]`, `id arg Ident:meta Punct:[ String:"a" Punct:]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "route r {\n  map {\n    " + tt.item + "\n  }\n}\n"
			f, diags := Parse("t.mqb", []byte(src))
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			dump := DumpAST(f)
			lines := strings.Split(dump, "\n")
			if len(lines) < 3 {
				t.Fatalf("dump:\n%s", dump)
			}
			if got := strings.TrimSpace(lines[2]); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			checkFormat(t, "t.mqb", []byte(src))
		})
	}
}

func TestParsePathErrors(t *testing.T) {
	tests := []struct{ name, item, want string }{
		{"dot without a name", "payload. = 1", `3:12 E001 expected a field name after "."`},
		{"unclosed index", `meta["k" = 1`, `3:9 E001 expected "]" after the key`},
		{"index not a string", `meta[5] = 1`, `3:9 E001 a key in a path is a quoted string`},
		{"del after a field on one line", `a = 1 del payload.x`, `3:11 E001 expected a newline or a comma before "del"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "route r {\n  map {\n    " + tt.item + "\n  }\n}\n"
			_, diags := Parse("t.mqb", []byte(src))
			if len(diags) != 1 {
				t.Fatalf("want one diagnostic, got %v", diags)
			}
			d := diags[0]
			if got := d.Range.Start.String()[len("t.mqb:"):] + " " + d.Code + " " + d.Summary; !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q, want prefix %q", got, tt.want)
			}
		})
	}
}
