package reference

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/stdlib"
)

var update = flag.Bool("update", false, "rewrite docs/reference.md")

// TestReferenceFresh fails when docs/reference.md no longer matches stdlib
// and diag.Codes; -update (or `mqbc docs -o docs`) rewrites it.
func TestReferenceFresh(t *testing.T) {
	path := filepath.Join("..", "reference.md")
	want := Markdown()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run mqbc docs -o docs)", err)
	}
	if string(got) != string(want) {
		t.Errorf("docs/reference.md is stale: run go run ./cmd/mqbc docs -o docs")
	}
}

// TestReferenceComplete checks that every declared name has its entry.
func TestReferenceComplete(t *testing.T) {
	md := string(Markdown())
	var want []string
	for _, k := range stdlib.Kinds {
		want = append(want, "### `"+k.Name+"`")
		for _, a := range k.Attrs {
			want = append(want, "| `"+a.Name+"` |")
		}
	}
	for _, s := range stdlib.Steps {
		want = append(want, "### `"+s.Name+"`")
		for _, a := range s.Attrs {
			want = append(want, "| `"+a.Name+"` |")
		}
	}
	for _, a := range stdlib.Settings {
		want = append(want, "| `"+a.Name+"` |")
	}
	for _, c := range diag.Codes {
		want = append(want, "### "+c.Code+"\n")
	}
	for _, w := range want {
		if !strings.Contains(md, w) {
			t.Errorf("reference lacks %q", w)
		}
	}
}
