package lsp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.lsp.dev/protocol"
	"golang.org/x/tools/txtar"
)

// corpus returns every .mqb text in the repository's golden cases and
// examples: valid files, and files with every kind of mistake.
func corpus(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	archives, _ := filepath.Glob("../testdata/check/*.txtar")
	for _, path := range archives {
		ar, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			if strings.HasSuffix(f.Name, ".mqb") {
				out[filepath.Base(path)+"/"+f.Name] = f.Data
			}
		}
	}
	examples, _ := filepath.Glob("../examples/*/*.mqb")
	for _, path := range examples {
		if info, err := os.Stat(path); err != nil || info.IsDir() {
			continue // examples/*/.mqb is run state
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = src
	}
	if len(out) == 0 {
		t.Skip("no .mqb files found")
	}
	return out
}

// TestEveryOffset asks for hover, completion and definition at every byte
// of every corpus file, and completion at the end of prefixes of it (text
// being typed): nothing may panic, and every hover range must lie in the
// document.
func TestEveryOffset(t *testing.T) {
	for name, src := range corpus(t) {
		uri := protocol.DocumentURI("file:///corpus/" + strings.ReplaceAll(name, "/", "_"))
		s := &server{docs: map[protocol.DocumentURI]*document{}}
		d := newDocument(uri, 1, string(src))
		s.docs[uri] = d
		s.compile(d)
		end := d.position(len(src))
		for off := 0; off <= len(src); off++ {
			pos := d.position(off)
			if h := s.hover(d, d.offset(pos)); h != nil && h.Range != nil {
				if r := *h.Range; after(r.Start, r.End) || after(r.End, end) {
					t.Fatalf("%s at %d: hover range %+v outside the document", name, off, r)
				}
			}
			s.complete(d, off)
			s.definition(d, off)
		}
		format(d)
		// Typing: the text up to every 11th byte, completed at its end.
		for n := 0; n <= len(src); n += 11 {
			p := newDocument(uri, 2, string(src[:n]))
			s.docs[uri] = p
			s.complete(p, n)
			s.hover(p, n)
		}
	}
}

func after(a, b protocol.Position) bool {
	return a.Line > b.Line || a.Line == b.Line && a.Character > b.Character
}
