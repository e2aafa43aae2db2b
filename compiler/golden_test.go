package compiler

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/stdlib"
)

var update = flag.Bool("update", false, "rewrite the golden sections of testdata/**/*.txtar")

// goldenCase compiles every .mqb file of a txtar archive and renders the
// sections the archive is compared on.
func goldenCase(ar *txtar.Archive) map[string]string {
	var srcs []Source
	sources := diag.Sources{}
	for _, f := range ar.Files {
		if strings.HasSuffix(f.Name, ".mqb") {
			srcs = append(srcs, Source{Name: f.Name, Src: f.Data})
			sources[f.Name] = f.Data
		}
	}
	p, diags := CompileSourcesWithin(srcs, goldenLimits(ar))
	out := map[string]string{}
	var b bytes.Buffer
	diag.WriteText(&b, diags, sources)
	out["diagnostics"] = b.String()
	b.Reset()
	for _, r := range p.Routes {
		b.WriteString(VerdictLine(r) + "\n")
		for _, pr := range r.Premises {
			b.WriteString(PremiseLine(pr) + "\n")
		}
	}
	out["verdict"] = b.String()
	j, _ := json.MarshalIndent(p.Redacted(), "", "  ")
	out["plan.json"] = string(j) + "\n"
	return out
}

// TestGolden runs testdata/check/*.txtar: `-- in.mqb --` (and any other
// .mqb files) against `-- diagnostics --`, `-- verdict --` (each verdict
// line with its premises under it, as `mqbc build` prints them) and, when the
// archive has one, `-- plan.json --`. `go test ./compiler -update`
// rewrites them.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("../testdata/check/*.txtar")
	if len(files) == 0 {
		t.Fatal("no golden cases under testdata/check")
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := goldenCase(ar)
			wantSections := []string{"diagnostics", "verdict"}
			for _, f := range ar.Files {
				if f.Name == "plan.json" {
					wantSections = append(wantSections, "plan.json")
				}
			}
			changed := false
			for _, name := range wantSections {
				i := slices.IndexFunc(ar.Files, func(f txtar.File) bool { return f.Name == name })
				if i < 0 {
					ar.Files = append(ar.Files, txtar.File{Name: name})
					i = len(ar.Files) - 1
				}
				if string(ar.Files[i].Data) == got[name] {
					continue
				}
				if *update {
					ar.Files[i].Data = []byte(got[name])
					changed = true
					continue
				}
				t.Errorf("%s: section %s differs\n--- got ---\n%s--- want ---\n%s", path, name, got[name], ar.Files[i].Data)
			}
			if changed {
				if err := os.WriteFile(path, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestEveryCodeHasAGoldenCase keeps the promise that each checker code is
// exercised by at least one golden case.
func TestEveryCodeHasAGoldenCase(t *testing.T) {
	files, _ := filepath.Glob("../testdata/check/*.txtar")
	seen := map[string]bool{}
	re := regexp.MustCompile(`(error|warning)\[([EW][0-9]{3})\]`)
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen[m[2]] = true
		}
	}
	unimplemented := false // E027 needs an end stdlib declares and nothing runs
	for _, k := range stdlib.Kinds {
		unimplemented = unimplemented || len(k.Unimplemented) > 0
	}
	for _, c := range diag.Codes {
		if c.Code == "E027" && !unimplemented {
			continue
		}
		if !seen[c.Code] {
			t.Errorf("no golden case under testdata/check reports %s (%s)", c.Code, c.Title)
		}
	}
}
