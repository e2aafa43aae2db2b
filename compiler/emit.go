package compiler

import (
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
)

// emit turns the checked route into its plan form.
func (rc *routeCtx) emit(r *lang.Route, g guaranteeProof) *plan.Route {
	out := &plan.Route{
		Name:        rc.name,
		Guarantee:   plan.AtLeastOnce,
		Reasons:     g.reasons,
		Warnings:    rc.warnings,
		Concurrency: int(rc.concurrency),
		BatchSize:   int(rc.batchSize),
		Nodes:       make([]plan.Node, 0, len(rc.nodes)),
		Edges:       make([]plan.Edge, 0, max(len(rc.nodes)-1, 0)),
		Pos:         lang.Range(r.Pos, r.Pos).Start,
	}
	if g.verdict != "" {
		out.Guarantee = g.verdict
	}
	if !g.effectivelyOnce() && g.missing != "" {
		out.Reasons = append(out.Reasons, "not effectively-once: "+g.missing)
	}
	if out.Reasons == nil {
		out.Reasons = []string{}
	}
	rc.ids = map[*nodeInfo]string{}
	for _, n := range rc.nodes {
		if n == rc.elided {
			continue
		}
		out.Nodes = append(out.Nodes, rc.node(n))
		if k := len(out.Nodes); k > 1 {
			out.Edges = append(out.Edges, plan.Edge{From: out.Nodes[k-2].ID, To: out.Nodes[k-1].ID})
		}
	}
	if d := rc.elided; d != nil {
		out.Elided = append(out.Elided, plan.Elision{Kind: "dedup", Key: d.attrs["key"].val.Expr, By: rc.ids[rc.elidedBy],
			Why: "the sink's conflict clause keeps the first row of the key and absorbs every repeat", Pos: d.rng.Start})
	}
	premises := g.guards
	if plan.GuaranteeRank(g.verdict) >= plan.GuaranteeRank(plan.AtLeastOnce) {
		premises = append(premises, g.floor...)
	}
	if g.effectivelyOnce() {
		// Premises back a proof; an unproven route has none to check.
		premises = append(premises, g.premises...)
	}
	for _, pa := range premises {
		pr := pa.p
		pr.Node = rc.ids[pa.node]
		if pr.Pos.Line == 0 && pa.node != nil {
			pr.Pos = pa.node.rng.Start
		}
		out.Premises = append(out.Premises, pr)
	}
	if rc.readsSrcMeta && len(out.Nodes) > 0 && out.Nodes[0].Role == plan.RoleSource {
		if sm, ok := out.Nodes[0].Attrs["source_metadata"]; ok && !sm.Bool {
			sm.Bool = true
			out.Nodes[0].Attrs["source_metadata"] = sm
		}
	}
	return out
}

func (rc *routeCtx) node(n *nodeInfo) plan.Node {
	id := nodeID(rc.nextID)
	rc.nextID++
	if rc.ids != nil {
		rc.ids[n] = id
	}
	pn := plan.Node{ID: id, Role: n.role, Kind: n.name, Side: n.side, Ref: n.ref, Expr: n.exprText, Assign: n.assign, Pos: n.rng.Start}
	if len(n.attrs) > 0 {
		pn.Attrs = make(map[string]plan.Value, len(n.attrs))
		for k, a := range n.attrs {
			pn.Attrs[k] = a.val
		}
	}
	for _, b := range n.children {
		pn.Children = append(pn.Children, plan.Branch{Label: b.label, Match: b.match, Node: rc.node(b.node)})
	}
	return pn
}

// nodeIDs are the first node IDs, made once rather than once a route.
var nodeIDs = func() []string {
	ids := make([]string, 32)
	for i := range ids {
		ids[i] = "n" + strconv.Itoa(i)
	}
	return ids
}()

// nodeID is a route's n-th node ID: "n0", "n1", …
func nodeID(n int) string {
	if n < len(nodeIDs) {
		return nodeIDs[n]
	}
	return "n" + strconv.Itoa(n)
}

// VerdictLine renders a route's verdict on one line (the golden files and
// logs use it; `mqbc build` prints VerdictText):
//
//	orders_to_db: effectively-once — identity: id payload.order_id (stable); write: …
func VerdictLine(r plan.Route) string {
	if len(r.Reasons) == 0 {
		return r.Name + ": " + r.Guarantee
	}
	return r.Name + ": " + r.Guarantee + " — " + strings.Join(r.Reasons, "; ")
}

// VerdictText renders a route's verdict for people: the verdict on the
// route's line, then each reason and each premise on a line of its own,
// indented, as `mqbc build` and `mqbc run` print it:
//
//	orders_to_db: effectively-once
//	  identity: id payload.order_id (stable)
//	  write: ON CONFLICT (id) DO NOTHING
//	  premise: table orders has a UNIQUE or PRIMARY KEY index on (id) (checked at start-up; needed by: …)
func VerdictText(r plan.Route, premises bool) string {
	var b strings.Builder
	b.WriteString(r.Name + ": " + r.Guarantee + "\n")
	for _, why := range r.Reasons {
		b.WriteString("  " + why + "\n")
	}
	if premises {
		for _, p := range r.Premises {
			b.WriteString(PremiseLine(p) + "\n")
		}
	}
	return b.String()
}

// PremiseLine renders one premise as `mqbc build` prints it under the
// verdict:
//
//	premise: table orders has a UNIQUE or PRIMARY KEY index on (id) (checked at start-up; needed by: write: …)
func PremiseLine(p plan.Premise) string {
	when := "checked at start-up"
	switch p.When {
	case plan.CheckPerRecord:
		when = "checked per record"
	case plan.CheckPerConnection:
		when = "checked on every connection"
	}
	line := "  premise: " + p.Holds + " (" + when
	if p.Reason != "" {
		line += "; needed by: " + p.Reason
	}
	return line + ")"
}
