package main

import (
	"path/filepath"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// localSchemes are URL schemes whose remainder is a local filesystem path.
var localSchemes = []string{"sqlite://", "pebble://", "file://"}

// resolvePaths makes every relative local path in the plan relative to the
// directory of the .mqb file that wrote it, so `mqbc run dir/x.mqb` works
// from any working directory: `path = "orders.jsonl"` next to the .mqb file
// means that file, as a user reading the .mqb file expects.
func resolvePaths(p *plan.Plan) {
	for i := range p.Routes {
		for j := range p.Routes[i].Nodes {
			resolveNode(&p.Routes[i].Nodes[j])
		}
	}
}

func resolveNode(n *plan.Node) {
	dir := filepath.Dir(n.Pos.File)
	for k, v := range n.Attrs {
		n.Attrs[k] = resolveValue(dir, n.Kind, k, v)
	}
	for i := range n.Children {
		resolveNode(&n.Children[i].Node)
	}
}

func resolveValue(dir, kind, attr string, v plan.Value) plan.Value {
	if v.Type != plan.TString {
		return v
	}
	if attr == "path" && kind == "file" {
		v.Str = joinRel(dir, v.Str)
		return v
	}
	for _, s := range localSchemes {
		if rest, ok := strings.CutPrefix(v.Str, s); ok {
			if rest == "" || strings.HasPrefix(rest, ":memory:") {
				return v
			}
			v.Str = s + joinRel(dir, rest)
			return v
		}
	}
	return v
}

func joinRel(dir, p string) string {
	if p == "" || filepath.IsAbs(p) || p == "-" {
		return p
	}
	return filepath.Join(dir, p)
}
