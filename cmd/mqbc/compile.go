package main

import (
	"fmt"
	"os"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
)

// compileFiles reads and compiles the .mqb files at paths. The error is
// for files that cannot be read; problems in the files are diagnostics.
// The plan is nil when there is a read error; otherwise callers must check
// diags.HasErrors() before using it. run.go reuses this.
func compileFiles(paths []string) (*plan.Plan, diag.List, diag.Sources, error) {
	srcs := make([]compiler.Source, 0, len(paths))
	sources := diag.Sources{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, sources, fmt.Errorf("read %s: %w", p, err)
		}
		srcs = append(srcs, compiler.Source{Name: p, Src: b})
		sources[p] = b
	}
	p, diags := compiler.CompileSources(srcs)
	return p, diags, sources, nil
}
