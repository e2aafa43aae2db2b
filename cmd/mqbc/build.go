package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
)

func init() {
	register(&command{
		Name:    "build",
		Usage:   "mqbc build FILE… [-o plan.json] [--indent] [--format text|json]",
		Summary: "check .mqb files, print each route's proven guarantee, and write the plan",
		Notes:   "The plan is compact JSON on one line, the form `mqbc run` and other programs read; --indent writes it two spaces a level, for people.",
		Run:     runBuild,
	})
}

// verdict is a route's verdict as --format json prints it.
type verdict struct {
	Name      string         `json:"name"`
	Guarantee string         `json:"guarantee"`
	Reasons   []string       `json:"reasons"`
	Premises  []plan.Premise `json:"premises,omitempty"`
}

func runBuild(args []string, stdout, stderr io.Writer) int {
	c := commands["build"]
	fs := newFlags(c, stderr)
	out := fs.String("o", "", "write the plan (JSON, secrets redacted) to this file; - for stdout")
	indent := fs.Bool("indent", false, "indent the plan written by -o, for people to read (compact by default)")
	format := fs.String("format", "text", "diagnostics format: text or json")
	paths, ok := parseFiles(c, fs, args, stderr, format, "text", "json")
	if !ok {
		return exitUsage
	}
	srcs, sources, err := readSources(paths)
	if err != nil {
		fmt.Fprintln(stderr, "mqbc build:", err)
		return exitError
	}
	// Each route is written out as it is compiled, its verdict and its
	// plan, and then let go: a build of many routes holds their text
	// rather than their plans. The text is printed once the whole build
	// is known to hold no error. Redaction rewrites only the nodes, so
	// the verdicts print the compiled route as they would its redacted
	// copy; the plan writer redacts each route as it writes it.
	var verdicts blockBuffer
	vs := []verdict{}
	var planText blockBuffer
	var pw *plan.Writer
	var planErr error
	if *out != "" {
		pw = plan.NewWriter(&planText, plan.Version, *indent)
	}
	diags := compiler.CompileSourcesTo(srcs, compiler.DefaultLimits, func(r *plan.Route) {
		switch {
		case *out == "-":
		case *format == "json":
			vs = append(vs, verdict{r.Name, r.Guarantee, r.Reasons, r.Premises})
		default:
			// The verdict and, under it, its reasons and what the proof
			// assumes about the world, one per line:
			//
			//	orders_to_db: effectively-once
			//	  identity: id payload.order_id (stable)
			//	  …
			//	  premise: table orders has a UNIQUE or PRIMARY KEY index on columns among (id) (checked at start-up; needed by: write: ON CONFLICT (id) DO NOTHING)
			verdicts.WriteString(plan.RedactURLs(compiler.VerdictText(*r, true)))
		}
		if pw != nil && planErr == nil {
			planErr = pw.Route(*r)
		}
	})
	writeDiags(stderr, *format, diags, sources)
	if diags.HasErrors() {
		return exitError
	}
	if *out != "-" {
		if *format == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(vs)
		} else {
			// A write a block: a write per route cost a large build a
			// system call per route.
			_, _ = verdicts.WriteTo(stdout)
		}
	}
	if pw != nil {
		if planErr == nil {
			planErr = pw.Close()
		}
		if err := writePlan(*out, &planText, planErr, stdout); err != nil {
			fmt.Fprintln(stderr, "mqbc build:", err)
			return exitError
		}
	}
	return exitOK
}

// writeDiags prints diagnostics as text with carets, or as a JSON array.
func writeDiags(w io.Writer, format string, diags diag.List, sources diag.Sources) {
	if format == "json" {
		_ = diag.WriteJSON(w, diags)
		return
	}
	diag.WriteText(w, diags, sources)
}

// writePlan writes the plan's text to path (- for stdout); encodeErr is
// an error met encoding it, reported as a write's would be.
func writePlan(path string, text *blockBuffer, encodeErr error, stdout io.Writer) error {
	if path == "-" {
		if encodeErr != nil {
			return encodeErr
		}
		_, err := text.WriteTo(stdout)
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	err = encodeErr
	if err == nil {
		_, err = text.WriteTo(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	return nil
}

// blockBuffer holds text in blocks of 1 MiB: it grows without copying
// what it holds, as a bytes.Buffer does each time it doubles (a plan of
// 10,000 routes is some 30 MB of JSON).
type blockBuffer struct{ blocks [][]byte }

const textBlock = 1 << 20

func (b *blockBuffer) Write(p []byte) (int, error) {
	return appendBlocks(b, p)
}

// WriteString is Write of a string, without copying it to a []byte
// first (the verdicts are written so, a route at a time).
func (b *blockBuffer) WriteString(s string) (int, error) {
	return appendBlocks(b, s)
}

func appendBlocks[T []byte | string](b *blockBuffer, p T) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(b.blocks) == 0 || len(b.blocks[len(b.blocks)-1]) == textBlock {
			b.blocks = append(b.blocks, make([]byte, 0, textBlock))
		}
		last := &b.blocks[len(b.blocks)-1]
		k := min(len(p), textBlock-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	return n, nil
}

// WriteTo writes the text to w.
func (b *blockBuffer) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, blk := range b.blocks {
		k, err := w.Write(blk)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
