package lang

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update rewrites golden files (grammar.ebnf, testdata/format/*.txtar)
// instead of comparing against them: go test ./lang -update.
var update = flag.Bool("update", false, "rewrite golden files")

// TestGrammarFresh fails when grammar.ebnf no longer matches the grammar.
func TestGrammarFresh(t *testing.T) {
	path := filepath.Join("..", "grammar.ebnf")
	want := Grammar()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./lang -update)", err)
	}
	if string(got) != want {
		t.Errorf("grammar.ebnf is stale: run go test ./lang -run TestGrammarFresh -update")
	}
}

// TestGrammarIsTheParser fails when a production of the grammar is not,
// word for word, the comment of a function of the parser, so that
// grammar.ebnf changes with the parser.
func TestGrammarIsTheParser(t *testing.T) {
	src, err := os.ReadFile("descent.go")
	if err != nil {
		t.Fatal(err)
	}
	comments := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		if c, ok := strings.CutPrefix(line, "// "); ok {
			comments[c] = true
		}
	}
	for _, prod := range grammar {
		if !comments[prod] {
			t.Errorf("no function of descent.go has the production %s as its comment", prod)
		}
	}
}
