package lang

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/diag"
)

// TestFormatGolden formats the `-- in.mqb --` section of every
// testdata/format/*.txtar and compares it with `-- out.mqb --`
// (rewritten by -update).
func TestFormatGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/format/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			in := section(ar, "in.mqb")
			if in == nil {
				t.Fatalf("%s has no in.mqb section", path)
			}
			got, diags := Format("in.mqb", in)
			if len(diags) != 0 {
				got = []byte("ERROR\n" + diagLines(diags))
			}
			if *update {
				setSection(ar, "out.mqb", got)
				if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want := section(ar, "out.mqb")
			if !bytes.Equal(got, want) {
				t.Errorf("format mismatch (run go test ./lang -run TestFormatGolden -update)\n--- got ---\n%s--- want ---\n%s", got, want)
			}
		})
	}
}

func diagLines(l diag.List) string {
	var b strings.Builder
	diag.WriteText(&b, l, nil)
	return b.String()
}

func section(ar *txtar.Archive, name string) []byte {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data
		}
	}
	return nil
}

func setSection(ar *txtar.Archive, name string, data []byte) {
	for i := range ar.Files {
		if ar.Files[i].Name == name {
			ar.Files[i].Data = data
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: data})
}

// formatInputs returns every .mqb text the formatter must handle: golden
// inputs and outputs, examples/**/*.mqb, and the .mqb sections of the
// repository's testdata/**/*.txtar that parse without errors.
func formatInputs(t testing.TB) map[string][]byte {
	t.Helper()
	inputs := map[string][]byte{"design": []byte(designExample)}
	golden, _ := filepath.Glob("testdata/format/*.txtar")
	for _, path := range golden {
		ar, err := txtar.ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ar.Files {
			if strings.HasSuffix(f.Name, ".mqb") {
				inputs[path+"/"+f.Name] = f.Data
			}
		}
	}
	for _, root := range []string{"../examples", "../testdata"} {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			switch {
			case strings.HasSuffix(path, ".mqb"):
				if b, err := os.ReadFile(path); err == nil {
					inputs[path] = b
				}
			case strings.HasSuffix(path, ".txtar"):
				ar, err := txtar.ParseFile(path)
				if err != nil {
					return nil
				}
				for _, f := range ar.Files {
					if strings.HasSuffix(f.Name, ".mqb") {
						inputs[path+"/"+f.Name] = f.Data
					}
				}
			}
			return nil
		})
	}
	return inputs
}

// TestFormatIdempotentAndFaithful checks, for every input that parses,
// that format(format(x)) == format(x), that the formatted file parses to
// the same AST, and that no comment is lost.
func TestFormatIdempotentAndFaithful(t *testing.T) {
	for name, src := range formatInputs(t) {
		if _, diags := Parse(name, src); diags.HasErrors() {
			continue
		}
		t.Run(name, func(t *testing.T) {
			checkFormat(t, name, src)
		})
	}
}

// checkFormat fails t unless formatting src (which parses) is idempotent,
// keeps the AST and keeps every comment.
func checkFormat(t *testing.T, name string, src []byte) {
	t.Helper()
	once, diags := Format(name, src)
	if diags.HasErrors() {
		t.Fatalf("format refused a file that parses: %v", diags)
	}
	twice, diags := Format(name, once)
	if diags.HasErrors() {
		t.Fatalf("formatted output does not parse: %v\n%s", diags, once)
	}
	if !bytes.Equal(once, twice) {
		t.Fatalf("format is not idempotent\n--- once ---\n%s--- twice ---\n%s", once, twice)
	}
	a, _ := Parse(name, src)
	b, _ := Parse(name, once)
	if da, db := DumpAST(a), DumpAST(b); da != db {
		t.Fatalf("format changed the AST\n--- before ---\n%s--- after ---\n%s--- output ---\n%s", da, db, once)
	}
	if ca, cb := commentTexts(a), commentTexts(b); ca != cb {
		t.Fatalf("format changed the comments\n--- before ---\n%s--- after ---\n%s", ca, cb)
	}
}

func commentTexts(f *File) string {
	var b strings.Builder
	for _, c := range f.Comments {
		b.WriteString(strings.TrimRight(c.Value, " \t\r") + "\n")
	}
	return b.String()
}

// DumpAST renders the parts of a file the formatter must not change:
// declarations, item keys, kinds, labels, refs and the tokens of values.
func DumpAST(f *File) string {
	var b strings.Builder
	for _, d := range f.Decls {
		switch {
		case d.Route != nil:
			fmt.Fprintf(&b, "route %s\n", d.Route.Name.Name)
			dumpBlock(&b, d.Route.Body, 1)
		case d.Endpoint != nil:
			fmt.Fprintf(&b, "%s %s = %s\n", d.Endpoint.Dir, d.Endpoint.Name.Name, d.Endpoint.Kind.Name)
			dumpBlock(&b, d.Endpoint.Body, 1)
		}
	}
	return b.String()
}

func dumpBlock(b *strings.Builder, blk *Block, depth int) {
	ind := strings.Repeat("  ", depth)
	for _, it := range blk.Items() {
		fmt.Fprintf(b, "%s%s", ind, it.KeyText())
		switch {
		case it.Del != nil:
			fmt.Fprintf(b, " del %s\n", it.Del.Text())
		case it.Unnest != nil:
			fmt.Fprintf(b, " unnest %s\n", it.Unnest.Text())
		case it.Ref != nil:
			fmt.Fprintf(b, " ref %s\n", it.Ref.Name)
		case it.Assign != nil:
			b.WriteString(" =")
			dumpValue(b, it.Assign, depth+1)
		case it.Body != nil:
			if it.Kind != nil {
				fmt.Fprintf(b, " kind %s", it.Kind.Name)
			}
			if it.Label != nil {
				fmt.Fprintf(b, " label %s", it.Label.Raw)
			}
			b.WriteString(" {\n")
			dumpBlock(b, it.Body, depth+1)
		case it.Arg != nil:
			fmt.Fprintf(b, " arg %s\n", dumpExpr(it.Arg))
		default:
			b.WriteString("\n")
		}
	}
}

func dumpValue(b *strings.Builder, v *Value, depth int) {
	switch {
	case v.Block != nil:
		b.WriteString(" {\n")
		dumpBlock(b, v.Block, depth)
	case v.List != nil:
		b.WriteString(" [\n")
		for _, e := range v.List.Elems {
			b.WriteString(strings.Repeat("  ", depth) + "-")
			dumpValue(b, e, depth+1)
		}
	case v.Expr != nil:
		b.WriteString(" " + dumpExpr(v.Expr) + "\n")
	}
}

func dumpExpr(e *Expr) string {
	parts := make([]string, len(e.Tokens))
	for i, t := range e.Tokens {
		parts[i] = TokenName(t.Type) + ":" + t.Value
	}
	return strings.Join(parts, " ")
}

// designExample is the example of DESIGN.md §2, which must stay valid.
const designExample = `# Comments run from '#' or '//' to end of line.
route orders_to_db {
  guarantee effectively_once      # optional: the build FAILS unless the checker proves it

  from file {
    path = "orders.jsonl"         # JSON lines; mode = consume | subscribe | group_subscribe
  }

  id payload.order_id             # input-only: sets meta["mqb.id"] (string) per record

  dedup {                         # input-only: drops repeats before the sink
    key   = meta["mqb.id"]
    store = "pebble://state/dedup"
    ttl   = 1h
  }

  to sql {
    url          = "sqlite://orders.db"
    insert_query = """
      INSERT INTO orders (id, body)
      VALUES (${meta["mqb.id"]}, ${payload.body})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`

// TestFormatRefusesSyntaxErrors checks that a broken file is not formatted.
func TestFormatRefusesSyntaxErrors(t *testing.T) {
	out, diags := Format("t.mqb", []byte("route r {\n  from file {\n"))
	if out != nil || !diags.HasErrors() {
		t.Fatalf("got %q, %v; want nil and errors", out, diags)
	}
}
