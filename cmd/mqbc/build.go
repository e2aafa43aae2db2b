package main

import (
	"bufio"
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
	p, ok := compileReported(c, paths, *format, stderr)
	if !ok {
		return exitError
	}
	// Redaction rewrites only the nodes, so the verdicts below print the
	// compiled plan as they would its redacted copy; the plan is redacted
	// route by route as it is written.
	if *format == "json" {
		type verdict struct {
			Name      string         `json:"name"`
			Guarantee string         `json:"guarantee"`
			Reasons   []string       `json:"reasons"`
			Premises  []plan.Premise `json:"premises,omitempty"`
		}
		vs := []verdict{}
		for _, r := range p.Routes {
			vs = append(vs, verdict{r.Name, r.Guarantee, r.Reasons, r.Premises})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if *out != "-" {
			_ = enc.Encode(vs)
		}
	} else if *out != "-" {
		writeVerdictsWithPremises(stdout, *p)
	}
	if *out != "" {
		if err := writePlan(*out, *p, *indent, stdout); err != nil {
			fmt.Fprintln(stderr, "mqbc build:", err)
			return exitError
		}
	}
	return exitOK
}

// writeVerdictsWithPremises prints each route's verdict and, under it, its
// reasons and what the proof assumes about the world, one per line:
//
//	orders_to_db: effectively-once
//	  identity: id payload.order_id (stable)
//	  …
//	  premise: table orders has a UNIQUE or PRIMARY KEY index on columns among (id) (checked at start-up; needed by: write: ON CONFLICT (id) DO NOTHING)
//
// The lines go through one buffer: a write per route cost a large build a
// system call per route.
func writeVerdictsWithPremises(w io.Writer, p plan.Plan) {
	bw := bufio.NewWriter(w)
	for _, r := range p.Routes {
		bw.WriteString(plan.RedactURLs(compiler.VerdictText(r, true)))
	}
	_ = bw.Flush()
}

// writeDiags prints diagnostics as text with carets, or as a JSON array.
func writeDiags(w io.Writer, format string, diags diag.List, sources diag.Sources) {
	if format == "json" {
		_ = diag.WriteJSON(w, diags)
		return
	}
	diag.WriteText(w, diags, sources)
}

// writePlan writes the plan, redacted, as JSON to path (- for stdout):
// compact unless indent.
func writePlan(path string, p plan.Plan, indent bool, stdout io.Writer) error {
	if path == "-" {
		return p.WriteJSON(stdout, indent)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	err = p.WriteJSON(f, indent)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	return nil
}
