package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

func init() {
	register(&command{
		Name:    "graph",
		Usage:   "mqbc graph FILE… [--format dot|mermaid]",
		Summary: "draw the compiled plan as a Graphviz DOT or Mermaid graph",
		Run:     runGraph,
	})
}

func runGraph(args []string, stdout, stderr io.Writer) int {
	c := commands["graph"]
	fs := newFlags(c, stderr)
	format := fs.String("format", "dot", "dot or mermaid")
	paths, ok := parseFiles(c, fs, args, stderr, format, "dot", "mermaid")
	if !ok {
		return exitUsage
	}
	p, ok := compileReported(c, paths, "text", stderr)
	if !ok {
		return exitError
	}
	red := p.Redacted()
	if *format == "mermaid" {
		writeMermaid(stdout, red)
	} else {
		writeDOT(stdout, red)
	}
	return exitOK
}

// graphEdge is one drawn edge, with an optional label (a switch case…).
type graphEdge struct{ from, to, label string }

// flatten lists a route's nodes and edges, nested children included.
func flatten(r plan.Route) (nodes []plan.Node, edges []graphEdge) {
	var walk func(n plan.Node)
	walk = func(n plan.Node) {
		nodes = append(nodes, n)
		for _, b := range n.Children {
			label := b.Label
			if b.Match != "" {
				label += " " + b.Match
			}
			edges = append(edges, graphEdge{n.ID, b.Node.ID, label})
			walk(b.Node)
		}
	}
	for _, n := range r.Nodes {
		walk(n)
	}
	for _, e := range r.Edges {
		edges = append(edges, graphEdge{e.From, e.To, ""})
	}
	return nodes, edges
}

func nodeLabel(n plan.Node) string {
	word := map[string]string{plan.RoleSource: "from", plan.RoleSink: "to", plan.RoleHandler: "handle"}[n.Role]
	label := strings.TrimSpace(word + " " + n.Kind)
	if n.Ref != "" {
		label += " (ref " + n.Ref + ")"
	}
	if n.Expr != "" {
		label += " " + n.Expr
	}
	if t := nodeTarget(n); t != "" {
		label += " " + t
	}
	return label
}

// targetAttrs names, per kind, the attributes that say what an endpoint
// reads or writes (a step's key), in the order a label shows them.
var targetAttrs = map[string][]string{
	"file":         {"path"},
	"kafka":        {"topic"},
	"nats":         {"subject", "stream"},
	"object_store": {"url"},
	"clickhouse":   {"table"},
	"mongodb":      {"database", "collection"},
	"http":         {"url"},
	"postgres_cdc": {"publication"},
	"redis":        {"stream"},
	"dedup":        {"key"},
	"switch":       {"on"},
}

// nodeTarget is what a node reads or writes, for its label: a file's path,
// a topic, a table (an SQL sink's from its INSERT), a step's key.
func nodeTarget(n plan.Node) string {
	if n.Kind == "sql" {
		if v, ok := n.Attrs["insert_query"]; ok {
			if f := strings.Fields(valueText(v)); len(f) > 2 {
				for i := 0; i+1 < len(f); i++ {
					if strings.EqualFold(f[i], "INTO") {
						return strings.TrimRight(strings.SplitN(f[i+1], "(", 2)[0], ";")
					}
				}
			}
		}
		if v, ok := n.Attrs["table"]; ok {
			return valueText(v)
		}
		return ""
	}
	var parts []string
	for _, a := range targetAttrs[n.Kind] {
		if v, ok := n.Attrs[a]; ok {
			if t := valueText(v); t != "" {
				parts = append(parts, t)
			}
		}
	}
	return plan.RedactURLs(strings.Join(parts, "."))
}

// valueText is an attribute as written: a template with its ${…} back.
func valueText(v plan.Value) string {
	if len(v.Template) == 0 {
		if v.Expr != "" {
			return v.Expr
		}
		return v.Str
	}
	var b strings.Builder
	for _, p := range v.Template {
		if p.Expr != "" {
			b.WriteString("${" + p.Expr + "}")
		} else {
			b.WriteString(p.Lit)
		}
	}
	return b.String()
}

func writeDOT(w io.Writer, p plan.Plan) {
	fmt.Fprintln(w, "digraph mqb {")
	fmt.Fprintln(w, "  rankdir=LR;")
	fmt.Fprintln(w, "  node [shape=box];")
	for i, r := range p.Routes {
		fmt.Fprintf(w, "  subgraph cluster_%d {\n    label=%q;\n", i, r.Name+" ("+r.Guarantee+")")
		nodes, edges := flatten(r)
		for _, n := range nodes {
			fmt.Fprintf(w, "    %q [label=%q];\n", r.Name+"/"+n.ID, nodeLabel(n))
		}
		for _, e := range edges {
			attr := ""
			if e.label != "" {
				attr = fmt.Sprintf(" [label=%q]", e.label)
			}
			fmt.Fprintf(w, "    %q -> %q%s;\n", r.Name+"/"+e.from, r.Name+"/"+e.to, attr)
		}
		fmt.Fprintln(w, "  }")
	}
	fmt.Fprintln(w, "}")
}

func writeMermaid(w io.Writer, p plan.Plan) {
	fmt.Fprintln(w, "flowchart LR")
	esc := func(s string) string { return strings.ReplaceAll(s, `"`, "#quot;") }
	for i, r := range p.Routes {
		fmt.Fprintf(w, "  subgraph r%d [\"%s (%s)\"]\n", i, esc(r.Name), r.Guarantee)
		nodes, edges := flatten(r)
		for _, n := range nodes {
			fmt.Fprintf(w, "    r%d_%s[\"%s\"]\n", i, n.ID, esc(nodeLabel(n)))
		}
		for _, e := range edges {
			if e.label != "" {
				fmt.Fprintf(w, "    r%d_%s -->|\"%s\"| r%d_%s\n", i, e.from, esc(e.label), i, e.to)
			} else {
				fmt.Fprintf(w, "    r%d_%s --> r%d_%s\n", i, e.from, i, e.to)
			}
		}
		fmt.Fprintln(w, "  end")
	}
}
