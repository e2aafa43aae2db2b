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

// applyStateDir points every checkpoint and dedup store left at its
// default (the attribute not written in the .mqb file) at dir/state and
// dir/dedup, for --state. Written stores are left as written.
func applyStateDir(p *plan.Plan, dir string) error {
	if dir == "" {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	var visit func(n *plan.Node)
	visit = func(n *plan.Node) {
		for attr, sub := range map[string]string{"checkpoint_store": "state", "store": "dedup"} {
			if attr == "store" && n.Kind != "dedup" {
				continue
			}
			if v, ok := n.Attrs[attr]; ok && v.Type == plan.TString && v.Pos.Line == 0 && strings.HasPrefix(v.Str, "pebble://") {
				v.Str = "pebble://" + filepath.Join(abs, sub)
				n.Attrs[attr] = v
			}
		}
		for i := range n.Children {
			visit(&n.Children[i].Node)
		}
	}
	for i := range p.Routes {
		for j := range p.Routes[i].Nodes {
			visit(&p.Routes[i].Nodes[j])
		}
	}
	return nil
}
