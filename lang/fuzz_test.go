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
	f.Add("route r {\n  map {\n    payload.customer.email = lower(payload.email)  # nested\n    meta[\"k\"] = payload.k\n    del payload.tmp\n  }\n  map { payload = {\"line\": payload} }\n}\n")
	f.Add("route r {\n  from file { path = \"o.jsonl\" }\n  unnest payload.items as item  # one per line item\n  unnest payload[\"a b\"].c\n  map { unnest a as, b = 1 }\n}\n")
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
		checkNodePositions(t, file, len(src))
		if diags.HasErrors() {
			return
		}
		checkFormat(t, "f.mqb", []byte(src))
	})
}

// checkNodePositions fails t when an AST node's range leaves the n-byte
// input or ends before it starts.
func checkNodePositions(t *testing.T, f *File, n int) {
	t.Helper()
	check := func(what string, pos, end Position) {
		if pos.Offset < 0 || end.Offset > n || end.Offset < pos.Offset || pos.Line < 1 {
			t.Fatalf("%s spans %v..%v, outside the %d-byte input", what, pos, end, n)
		}
	}
	var block func(b *Block)
	var value func(v *Value)
	value = func(v *Value) {
		check("value", v.Pos, v.EndPos)
		switch {
		case v.Block != nil:
			block(v.Block)
		case v.List != nil:
			check("list", v.List.Pos, v.List.EndPos)
			for _, e := range v.List.Elems {
				value(e)
			}
		case v.Expr != nil:
			check("expression", v.Expr.Pos, v.Expr.EndPos)
		}
	}
	block = func(b *Block) {
		if b == nil {
			return
		}
		check("block", b.Pos, b.EndPos)
		for _, it := range b.Items() {
			check("item", it.Pos, it.EndPos)
			check("key", it.Key.Pos, it.Key.EndPos)
			if it.Path != nil {
				check("key path", it.Path.Pos, it.Path.EndPos)
				for _, s := range it.Path.Segments {
					check("path segment", s.Pos, s.EndPos)
				}
			}
			if it.Del != nil {
				check("del path", it.Del.Pos, it.Del.EndPos)
			}
			if it.Unnest != nil {
				check("unnest argument", it.Unnest.Pos, it.Unnest.EndPos)
			}
			if it.Assign != nil {
				value(it.Assign)
			}
			if it.Arg != nil {
				check("argument", it.Arg.Pos, it.Arg.EndPos)
			}
			block(it.Body)
		}
	}
	for _, d := range f.Decls {
		switch {
		case d.Route != nil:
			check("route", d.Route.Pos, d.Route.EndPos)
			block(d.Route.Body)
		case d.Endpoint != nil:
			check("endpoint", d.Endpoint.Pos, d.Endpoint.EndPos)
			block(d.Endpoint.Body)
		}
	}
}
