package lang

import (
	"flag"
	"os"
	"path/filepath"
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
