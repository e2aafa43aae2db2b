package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/txtar"
)

// A regression case is a txtar archive: the comment says what was found,
// case.json holds the seed, kills and what the checker must know about each
// route's sinks, routes.mqb and in.jsonl are the pipeline and its input.

func writeCase(dir string, res *Result) (string, error) {
	c := res.Case
	meta, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	ar := &txtar.Archive{
		Comment: []byte(report(res)),
		Files: []txtar.File{
			{Name: "case.json", Data: append(meta, '\n')},
			{Name: "routes.mqb", Data: []byte(c.Source)},
			{Name: "in.jsonl", Data: []byte(c.Input)},
		},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.Name+".txtar")
	return path, os.WriteFile(path, txtar.Format(ar), 0o644)
}

func readCase(path string) (*Case, error) {
	ar, err := txtar.ParseFile(path)
	if err != nil {
		return nil, err
	}
	c := &Case{}
	var haveMeta bool
	for _, f := range ar.Files {
		switch f.Name {
		case "case.json":
			if err := json.Unmarshal(f.Data, c); err != nil {
				return nil, fmt.Errorf("%s: case.json: %w", path, err)
			}
			haveMeta = true
		case "routes.mqb":
			c.Source = string(f.Data)
		case "in.jsonl":
			c.Input = string(f.Data)
		}
	}
	if !haveMeta || c.Source == "" {
		return nil, fmt.Errorf("%s: needs case.json and routes.mqb", path)
	}
	c.Name = strings.TrimSuffix(filepath.Base(path), ".txtar")
	return c, nil
}

// report says what a result found, for a person: the seed, each route's
// verdict with its reasons, the routes, and the differences.
func report(res *Result) string {
	c := res.Case
	var b strings.Builder
	fmt.Fprintf(&b, "soundness: %s (seed %d, %d kills landed of %d asked)\n", c.Name, c.Seed, res.Kills, c.Kills)
	for _, f := range res.Findings {
		fmt.Fprintf(&b, "\nFALSE VERDICT: route %s is %s, but the %s\n", f.Route, f.Verdict.Guarantee, f.What)
		for _, r := range f.Verdict.Reasons {
			fmt.Fprintf(&b, "  reason: %s\n", r)
		}
		b.WriteString(f.Diff)
	}
	for _, u := range res.Unexplained {
		fmt.Fprintf(&b, "\nUNEXPLAINED: route %s is %s, and two clean runs differ on a route the generator calls deterministic: "+
			"a per-delivery value or an order-dependent table the generator did not mark, or an identity that depends on the delivery\n",
			u.Route, u.Verdict.Guarantee)
		for _, r := range u.Verdict.Reasons {
			fmt.Fprintf(&b, "  reason: %s\n", r)
		}
		b.WriteString(u.Hints)
		fmt.Fprintf(&b, "second clean run against the first (second clean run: %v):\n%s", u.Second, u.Clean)
		fmt.Fprintf(&b, "killed run against the first clean run:\n%s", u.Killed)
	}
	for _, e := range res.Explained {
		fmt.Fprintf(&b, "\nEXPLAINED: route %s: its killed run differs from the clean run only by what its verdict allows:\n%s", e.Route, e.Text)
	}
	for _, f := range res.CleanFailed {
		if f.Which == cleanNoKill {
			fmt.Fprintf(&b, "\nINCONCLUSIVE: route %s: its clean run failed before it wrote anything, and so did the last killed run, so nothing was tested (not a verdict; the failure is worth a look):\n  %v\n",
				f.Route, f.Run)
			continue
		}
		fmt.Fprintf(&b, "\nINCONCLUSIVE: route %s: its runs differ, but its %s failed, so the comparison tests nothing (not a verdict; the failure is worth a look):\n  %v\n",
			f.Route, f.Which, f.Run)
	}
	b.WriteString(stuckReport(res.Stuck))
	fmt.Fprintf(&b, "\nclean run: %v\nlast killed run: %v\n\n", res.Clean, res.Final)
	b.WriteString(c.Source)
	return b.String()
}
