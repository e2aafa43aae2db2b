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
		Usage:   "mqbc build FILE… [-o plan.json] [--format text|json]",
		Summary: "check .mqb files, print each route's proven guarantee, and write the plan",
		Run:     runBuild,
	})
}

func runBuild(args []string, stdout, stderr io.Writer) int {
	c := commands["build"]
	fs := newFlags(c, stderr)
	out := fs.String("o", "", "write the plan (JSON, secrets redacted) to this file; - for stdout")
	format := fs.String("format", "text", "diagnostics format: text or json")
	paths, ok := parseFiles(c, fs, args, stderr, format, "text", "json")
	if !ok {
		return exitUsage
	}
	p, ok := compileReported(c, paths, *format, stderr)
	if !ok {
		return exitError
	}
	red := p.Redacted()
	if *format == "json" {
		type verdict struct {
			Name      string         `json:"name"`
			Guarantee string         `json:"guarantee"`
			Reasons   []string       `json:"reasons"`
			Premises  []plan.Premise `json:"premises,omitempty"`
		}
		vs := []verdict{}
		for _, r := range red.Routes {
			vs = append(vs, verdict{r.Name, r.Guarantee, r.Reasons, r.Premises})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if *out != "-" {
			_ = enc.Encode(vs)
		}
	} else if *out != "-" {
		writeVerdictsWithPremises(stdout, red)
	}
	if *out != "" {
		if err := writePlan(*out, red, stdout); err != nil {
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

// writePlan writes an already redacted plan as indented JSON.
func writePlan(path string, p plan.Plan, stdout io.Writer) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}
