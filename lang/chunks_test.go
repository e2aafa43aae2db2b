package lang

import (
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/tools/txtar"
)

// TestParseDeclsMatchesWholeParse: parsing declaration by declaration
// gives the very AST (positions included) of one parse of the whole file,
// over hand-written edge cases and every .mqb file of the golden cases.
func TestParseDeclsMatchesWholeParse(t *testing.T) {
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
		whole, wholeErr := parseTokens(toks)
		decls, err := parseDecls(toks)
		if (err == nil) != (wholeErr == nil) {
			t.Errorf("%s: chunked error %v, whole-file error %v", name, err, wholeErr)
			continue
		}
		if err != nil {
			if err.Error() != wholeErr.Error() {
				t.Errorf("%s: chunked error %v, whole-file error %v", name, err, wholeErr)
			}
			continue
		}
		if !reflect.DeepEqual(decls, whole.Decls) && !(len(decls) == 0 && len(whole.Decls) == 0) {
			t.Errorf("%s: chunked parse differs from the whole-file parse", name)
		}
	}
}
