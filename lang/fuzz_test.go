package lang

import (
	"testing"
)

// FuzzParse feeds arbitrary text to the parser: it must never panic, every
// diagnostic must point inside the input, and a file that parses must
// format idempotently to the same AST with every comment kept.
// Run: go test -fuzz FuzzParse -fuzztime 3m ./lang
// Crashers land in testdata/fuzz/FuzzParse and stay as regression cases.
func FuzzParse(f *testing.F) {
	for _, src := range formatInputs(f) {
		f.Add(string(src))
	}
	f.Add(designExample)
	f.Add("route r { to switch { on = meta[\"x\"]  case \"a\" { to ref e }  default { to file { path = \"x\" } } } }\n")
	f.Add("output e = http { url = \"http://${env(\\\"H\\\")}/x\" }\nroute r { from kafka { url = \"k\", topic = \"t\" } to ref e }\n")
	f.Fuzz(func(t *testing.T, src string) {
		file, diags := Parse("f.mqb", []byte(src))
		if file == nil {
			t.Fatal("Parse returned a nil file")
		}
		for _, d := range diags {
			for _, p := range []struct {
				name string
				off  int
				line int
			}{{"start", d.Range.Start.Offset, d.Range.Start.Line}, {"end", d.Range.End.Offset, d.Range.End.Line}} {
				if p.off < 0 || p.off > len(src) || p.line < 1 {
					t.Fatalf("%s of %q at offset %d line %d, outside the %d-byte input", p.name, d.Summary, p.off, p.line, len(src))
				}
			}
			if d.Range.End.Offset < d.Range.Start.Offset {
				t.Fatalf("diagnostic %q ends before it starts: %+v", d.Summary, d.Range)
			}
			if d.Code == "" || d.Summary == "" {
				t.Fatalf("diagnostic without code or summary: %+v", d)
			}
		}
		if diags.HasErrors() {
			return
		}
		checkFormat(t, "f.mqb", []byte(src))
	})
}
