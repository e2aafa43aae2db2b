package lang

import (
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/internal/genroutes"
)

// TestChunksMatchWholeParse: when every declaration parses on its own, as
// the recovery after a syntax error parses them, together they are the very
// AST (positions included) of one parse of the whole file, over
// hand-written edge cases and every .mqb file of the golden cases.
func TestChunksMatchWholeParse(t *testing.T) {
	for name, src := range chunkSources(t) {
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

// TestParseByDeclMatchesWholeParse: the file parseByDecl builds a
// declaration at a time is the one a parse of the whole file's tokens
// builds (declarations with their positions, comments, token count and
// diagnostics), and it gives up exactly where a declaration does not
// parse on its own or the token bound is reached, over the sources of
// TestChunksMatchWholeParse, generated routes and bounds cutting them.
func TestParseByDeclMatchesWholeParse(t *testing.T) {
	srcs := chunkSources(t)
	srcs["generated"] = string(genroutes.Routes(30))
	srcs["lexical error"] = "route a {\n  dedup { ttl = 5x }\n  id payload.x & 1\n}\nroute b { id payload.y }\n"
	srcs["unclosed, then a route"] = "route a {\n  id payload.x\nroute b { id payload.y }\n"
	// What checkDecl finds and changes, in two declarations so its
	// diagnostics' order shows: a kind on the next line (split), a label
	// on the next line, a missing separator and a malformed path, after
	// a lexical error.
	srcs["checked"] = "route a {\n  keep\n    dedup { ttl = 1h }\n  case\n    \"x\" { }\n}\n" +
		"route b {\n  from file { path = \"a\" mode = consume }\n  dedup { ttl = 5x }\n  map {\n    payload. = 1\n    meta[5] = 2\n  }\n}\n"
	byDecl := 0
	for name, src := range srcs {
		for _, bound := range []int{0, 40, 2_000} {
			toks, lexDiags, over := lexWithin("t.mqb", []byte(src), bound)
			want, wantDiags := parseTokensOf("t.mqb", []byte(src), toks, lexDiags)
			_, wholeErr := parseDeclTokens(toks)
			_, chunkErr := parseChunks(toks)
			f, diags, ok := parseByDecl("t.mqb", []byte(src), bound)
			if wantOK := !over && chunkErr == nil; ok != wantOK {
				t.Errorf("%s, bound %d: parseByDecl ok = %v, want %v", name, bound, ok, wantOK)
				continue
			}
			if !ok {
				continue
			}
			byDecl++
			if wholeErr != nil {
				t.Errorf("%s, bound %d: parsed by declaration, but the whole file does not parse: %v", name, bound, wholeErr)
				continue
			}
			got, gotDiags := checked(f, diags)
			if !reflect.DeepEqual(got, want) && !(len(got.Decls) == 0 && len(want.Decls) == 0 && got.Tokens == want.Tokens && len(got.Comments) == len(want.Comments)) {
				t.Errorf("%s, bound %d: the file parsed by declaration differs from the whole-file parse", name, bound)
			}
			if !reflect.DeepEqual(gotDiags, wantDiags) {
				t.Errorf("%s, bound %d: diagnostics\n%v\nwant\n%v", name, bound, gotDiags, wantDiags)
			}
		}
	}
	if byDecl < 20 {
		t.Fatalf("only %d sources parsed by declaration", byDecl)
	}
}

// chunkSources are hand-written edge cases of where declarations start
// and end, and every .mqb file of the golden cases.
func chunkSources(t *testing.T) map[string]string {
	t.Helper()
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
	return srcs
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
