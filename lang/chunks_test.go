package lang

import (
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/tools/txtar"
)

// TestChunksMatchWholeParse: when every declaration parses on its own, as
// the recovery after a syntax error parses them, together they are the very
// AST (positions included) of one parse of the whole file, over
// hand-written edge cases and every .mqb file of the golden cases.
func TestChunksMatchWholeParse(t *testing.T) {
	srcs := map[string]string{
		"trailing blanks":  "route a {\n  from file { path = \"a\" }\n  to file { path = \"b\" }\n}   ",
		"no final newline": "route a {\n  from file { path = \"a\" }\n}\nroute b { to file { path = \"b\" } }",
		"comments between": "# head\n\nroute a { id payload.x }\n# between\n  # indented\noutput o = file { path = \"x\" }\n\n\ninput i = file { path = \"y\" } # tail\n",
		"two on a line":    "route a { id payload.x } route b { id payload.y }\n",
		"decl word inside": "route a {\n  map {\n    input = payload.x\n  }\n  input payload.x\n}\nroute b { id payload.y }\n",
		"empty":            "",
		"only comments":    "# nothing\n",
	}
	files, _ := filepath.Glob("../testdata/check/*.txtar")
	for _, f := range files {
		a, err := txtar.ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, af := range a.Files {
			if filepath.Ext(af.Name) == ".mqb" {
				srcs[filepath.Base(f)+"/"+af.Name] = string(af.Data)
			}
		}
	}
	if len(srcs) < 20 {
		t.Fatalf("only %d sources; the golden cases are missing", len(srcs))
	}
	for name, src := range srcs {
		toks, _ := Lex("t.mqb", []byte(src))
		whole, wholeErr := parseDeclTokens(toks)
		decls, err := parseChunks(toks)
		if err != nil {
			// A chunk cut inside a block: only the whole parse reads it.
			continue
		}
		if wholeErr != nil {
			t.Errorf("%s: every chunk parses, the whole file does not: %v", name, wholeErr)
			continue
		}
		if !reflect.DeepEqual(decls, whole) && !(len(decls) == 0 && len(whole) == 0) {
			t.Errorf("%s: chunked parse differs from the whole-file parse", name)
		}
	}
}

// parseChunks parses toks one chunk (splitDecls) at a time; the last
// chunk ends where the file does, trailing blanks included, as a node
// ending at end of file does in one parse.
func parseChunks(toks []Token) ([]*Decl, *syntaxErr) {
	var decls []*Decl
	chunks := splitDecls(toks)
	if n := len(chunks); n > 0 && toks[len(toks)-1].EOF() {
		last := chunks[n-1]
		last[len(last)-1] = toks[len(toks)-1]
	}
	for _, chunk := range chunks {
		d, err := parseDeclTokens(chunk)
		if err != nil {
			return nil, err
		}
		decls = append(decls, d...)
	}
	return decls, nil
}
