package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// TestDropTornTail: a file sink reopened after a crash mid-write cuts the
// unterminated fragment, so the next record is not glued onto it; whole
// lines are kept.
func TestDropTornTail(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"a\nb\n", "a\nb\n"},
		{"a\nb\n{\"torn", "a\nb\n"},
		{"{\"torn", ""},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		if err := os.WriteFile(path, []byte(tt.in), 0o600); err != nil {
			t.Fatal(err)
		}
		n := &plan.Node{Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{"path": {Type: plan.TString, Str: path}}}
		s, err := newFileSink(nodeAttrs{route: "r", node: n}, "", false)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		got, _ := os.ReadFile(path)
		if string(got) != tt.want {
			t.Errorf("%q: got %q, want %q", tt.in, got, tt.want)
		}
	}
}
