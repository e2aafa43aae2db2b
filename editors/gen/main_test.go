package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated grammar")

// TestGrammarFresh fails when the committed TextMate grammar no longer
// matches stdlib; -update rewrites it.
func TestGrammarFresh(t *testing.T) {
	path := filepath.Join("..", "..", DefaultOut)
	want := Generate()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go run ./editors/gen)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale: run go run ./editors/gen (or go test ./editors/gen -update)", DefaultOut)
	}
}
