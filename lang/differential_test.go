package lang

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"
)

// parseBoth parses src with the recursive-descent parser and with the
// participle one and fails t when their files or diagnostics differ.
func parseBoth(t *testing.T, src string) {
	t.Helper()
	toks, diags := Lex("f.mqb", []byte(src))
	newFile, newList := parseTokensWith("f.mqb", []byte(src), toks, diags, parseWhole, parseWhole)
	toks, diags = Lex("f.mqb", []byte(src))
	oldFile, oldList := parseTokensWith("f.mqb", []byte(src), toks, diags, participleOld, participleDecls)
	if !reflect.DeepEqual(newList, oldList) {
		t.Fatalf("diagnostics differ for %q:\nnew %v\nold %v", src, newList, oldList)
	}
	if !(len(newFile.Decls) == 0 && len(oldFile.Decls) == 0) && !reflect.DeepEqual(newFile.Decls, oldFile.Decls) {
		t.Fatalf("ASTs differ for %q:\nnew %s\nold %s", src, DumpAST(newFile), DumpAST(oldFile))
	}
}

func participleOld(toks []lexer.Token) ([]*Decl, error) { return parseDecls(toks) }

// corpus returns the inputs of the FuzzParse corpus.
func corpus(t testing.TB) []string {
	files, _ := filepath.Glob("testdata/fuzz/FuzzParse/*")
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if q, ok := strings.CutPrefix(line, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(q, ")")); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func TestDifferential(t *testing.T) {
	for name, src := range formatInputs(t) {
		t.Run(name, func(t *testing.T) { parseBoth(t, string(src)) })
	}
	for _, src := range corpus(t) {
		parseBoth(t, src)
	}
}

// FuzzDifferential parses the same input with both parsers.
func FuzzDifferential(f *testing.F) {
	for _, src := range formatInputs(f) {
		f.Add(string(src))
	}
	for _, src := range corpus(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) { parseBoth(t, src) })
}
