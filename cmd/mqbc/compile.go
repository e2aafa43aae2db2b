package main

import (
	"fmt"
	"io"
	"os"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
)

// compileFiles reads and compiles the .mqb files at paths. The error is
// for files that cannot be read; problems in the files are diagnostics.
// The plan is nil when there is a read error; otherwise callers must check
// diags.HasErrors() before using it.
func compileFiles(paths []string) (*plan.Plan, diag.List, diag.Sources, error) {
	srcs, sources, err := readSources(paths)
	if err != nil {
		return nil, nil, sources, err
	}
	p, diags := compiler.CompileSources(srcs)
	return p, diags, sources, nil
}

// readSources reads the .mqb files at paths, each also in sources for
// rendering diagnostics. The error is for a file that cannot be read.
func readSources(paths []string) ([]compiler.Source, diag.Sources, error) {
	srcs := make([]compiler.Source, 0, len(paths))
	sources := diag.Sources{}
	// Read no more than one byte past the build's bound, so a huge file
	// is refused (E003) without being read whole.
	left := compiler.DefaultLimits.SourceBytes + 1
	for _, p := range paths {
		b, err := readAtMost(p, left)
		if err != nil {
			return nil, sources, fmt.Errorf("read %s: %w", p, err)
		}
		left = max(left-len(b), 0)
		srcs = append(srcs, compiler.Source{Name: p, Src: b})
		sources[p] = b
	}
	return srcs, sources, nil
}

// readAtMost reads up to n bytes of the file at path.
func readAtMost(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(n)))
}

// compileReported compiles paths for command c and prints the diagnostics
// on stderr in format (text or json). ok is false when a file cannot be
// read (said on stderr) or has errors: the command exits with exitError.
func compileReported(c *command, paths []string, format string, stderr io.Writer) (p *plan.Plan, ok bool) {
	p, diags, sources, err := compileFiles(paths)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc "+c.Name+":", err)
		return nil, false
	}
	writeDiags(stderr, format, diags, sources)
	if diags.HasErrors() {
		return nil, false
	}
	return p, true
}

// writeVerdicts prints each route's proven guarantee and, under it, its
// reasons one per line, URL passwords redacted.
func writeVerdicts(w io.Writer, p plan.Plan) {
	for _, r := range p.Routes {
		fmt.Fprint(w, plan.RedactURLs(compiler.VerdictText(r, false)))
	}
}
