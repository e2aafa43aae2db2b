package compiler

import (
	"fmt"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// guaranteeProof is a route's verdict with the reasons that prove it, or
// the missing piece when effectively-once is not proven.
type guaranteeProof struct {
	effectivelyOnce bool
	// exactlyOnce: the transactional outbox covers the route (it implies
	// effectivelyOnce).
	exactlyOnce bool
	reasons     []string
	missing     string
	premises    []premiseAt
}

// premiseAt is a premise of the proof about one node; emit fills in the
// node's plan ID.
type premiseAt struct {
	node *nodeInfo
	p    plan.Premise
}

// sinkProof is the verdict for one sink (or handler, or branch).
type sinkProof struct {
	ok       bool
	reasons  []string
	missing  string
	premises []premiseAt
}

// prove applies DESIGN §3 to a route: effectively-once when the sink write
// is key-addressed and idempotent with a stable key, or positionally named
// over a replayable source; otherwise at-least-once.
func (rc *routeCtx) prove(source, handler, sink *nodeInfo) guaranteeProof {
	var g guaranteeProof
	if rc.idText != "" {
		g.reasons = append(g.reasons, fmt.Sprintf("identity: id %s (%s)", rc.idText, rc.idStab))
	}
	var stableDedup *nodeInfo
	for _, d := range rc.dedups {
		key, ttl := d.attrs["key"], d.attrs["ttl"]
		if key == nil || ttl == nil {
			continue
		}
		g.reasons = append(g.reasons, fmt.Sprintf("dedup: key %s (%s), remembered for %s", key.val.Expr, key.stab, ttl.val.Str))
		if key.stab.Stable && stableDedup == nil {
			stableDedup = d
		}
	}
	if handler != nil {
		hp := rc.proveSink(handler)
		if hp.ok {
			g.reasons = append(g.reasons, "handler: "+handler.name+" runs before the sink; its own write is idempotent ("+strings.Join(hp.reasons, "; ")+"), so a replay re-runs it without landing twice")
		} else {
			line := "handler: " + handler.name + " runs before the sink's idempotency, so a replay runs it again (its side effects are at-least-once)"
			if stableDedup != nil {
				line += "; the dedup above keeps duplicates away from it within its ttl"
			}
			g.reasons = append(g.reasons, line)
		}
	}
	if sink == nil {
		g.missing = "the route has no sink"
		if source == nil {
			g.missing = "the route has no source and no sink"
		}
		return g
	}
	outbox := handler == nil && rc.outboxApplies(source, sink)
	rc.outbox = outbox
	sp := rc.proveSink(sink)
	rc.outbox = false
	if sp.ok || sink.kind == nil || sink.kind.Structural || outbox {
		// An unproven plain sink is explained by the "not effectively-once"
		// line; its own write line would only repeat it.
		g.reasons = append(g.reasons, sp.reasons...)
	}
	g.effectivelyOnce = sp.ok
	g.missing = sp.missing
	g.premises = append(g.premises, sp.premises...)
	if outbox {
		g.reasons = append(g.reasons, outboxReason)
		g.exactlyOnce, g.effectivelyOnce, g.missing = true, true, ""
	}
	if !sp.ok && sink.kind != nil && sink.kind.Broker {
		if stableDedup != nil {
			g.reasons = append(g.reasons, fmt.Sprintf("note: duplicates filtered within ttl (%s) by dedup before %s", stableDedup.attrs["ttl"].val.Str, sink.name))
		} else {
			g.reasons = append(g.reasons, "note: no dedup with a stable key before the broker, so consumers see every replay")
		}
	}
	return g
}

// outboxReason is the exactly-once verdict's reason.
const outboxReason = "source position committed in the sink's transaction (transactional outbox, table mqb_outbox): each source row is written exactly once, even by a plain INSERT"

// outboxApplies reports whether the runtime will run the route with the
// transactional outbox (runtime/sqloutbox.go, wireOutbox): a sql cursor
// source and a sql sink (not behind a handler, a switch or a fan-out) on
// the same database as the same user (plan.SameDatabase, which the runtime
// calls too), at concurrency 1. The caller checks that there is no handler.
func (rc *routeCtx) outboxApplies(source, sink *nodeInfo) bool {
	if source == nil || sink == nil || source.kind == nil || sink.kind == nil ||
		source.kind.Name != "sql" || sink.kind.Name != "sql" || source.broken || sink.broken ||
		source.role != plan.RoleSource || sink.role != plan.RoleSink || rc.concurrency != 1 || sink.attrs["insert_query"] == nil {
		return false
	}
	a, aStatic, ok1 := urlText(source.attrs["url"])
	b, bStatic, ok2 := urlText(sink.attrs["url"])
	switch {
	case !ok1 || !ok2:
		return false
	case aStatic && bStatic:
		return plan.SameDatabase(a, b)
	default:
		// Placeholders (env(), secrets) are only known at run time: the
		// same written url renders the same, and the source only reads
		// postgres:// and mysql:// urls, so the sink then shares its
		// database. Different written urls are not proven the same.
		return a == b
	}
}

// urlText is the written form of a url attribute and whether it has no
// placeholders.
func urlText(a *attrInfo) (text string, static, ok bool) {
	if a == nil {
		return "", false, false
	}
	switch a.val.Type {
	case plan.TString:
		return a.val.Str, true, true
	case plan.TTemplate:
		var lit strings.Builder
		for _, p := range a.val.Template {
			if p.Expr != "" {
				return templateText(a.val.Template), false, true
			}
			lit.WriteString(p.Lit)
		}
		return lit.String(), true, true
	}
	return "", false, false
}

// proveSink decides how the node absorbs a repeated write.
func (rc *routeCtx) proveSink(n *nodeInfo) sinkProof {
	if n == nil || n.kind == nil {
		return sinkProof{missing: "the sink did not check"}
	}
	k := n.kind
	if n.broken && !k.Structural {
		return sinkProof{missing: fmt.Sprintf("%s has errors (see above)", k.Name)}
	}
	if k.Structural {
		return rc.proveStructural(n)
	}
	switch k.Name {
	case "sql":
		return rc.proveSQL(n)
	case "mongodb":
		return rc.proveMongo(n)
	case "clickhouse":
		return rc.proveClickHouse(n)
	case "file", "object_store":
		return rc.provePositional(n)
	}
	p := sinkProof{}
	if k.Broker {
		p.reasons = []string{fmt.Sprintf("write: %s is a broker and cannot absorb a repeat", k.Name)}
		p.missing = fmt.Sprintf("sink write is not idempotent: a %s broker cannot absorb a repeat", k.Name)
	} else {
		p.reasons = []string{fmt.Sprintf("write: %s has no key to absorb a repeat", k.Name)}
		p.missing = fmt.Sprintf("sink write is not idempotent: %s has no key to absorb a repeat", k.Name)
	}
	return p
}

func (rc *routeCtx) proveStructural(n *nodeInfo) sinkProof {
	p := sinkProof{ok: len(n.children) > 0}
	if len(n.children) == 0 {
		p.missing = n.name + " has no branches"
	}
	for _, b := range n.children {
		label := b.label
		if b.label == plan.BranchCase {
			label = fmt.Sprintf("case %q", b.match)
		}
		bp := rc.proveSink(b.node)
		p.premises = append(p.premises, bp.premises...)
		for _, r := range bp.reasons {
			p.reasons = append(p.reasons, fmt.Sprintf("%s %s: %s", n.name, label, r))
		}
		if !bp.ok {
			if p.ok || p.missing == "" {
				p.missing = fmt.Sprintf("%s %s: %s", n.name, label, bp.missing)
			}
			p.ok = false
		}
	}
	return p
}

func (rc *routeCtx) provePositional(n *nodeInfo) sinkProof {
	var p sinkProof
	nameBy := n.attrs["name_by"]
	scheme, explicit := "write_time", false
	at := n.rng
	if nameBy != nil {
		scheme, explicit = nameBy.val.Str, nameBy.explicit
		if nameBy.explicit {
			at = nameBy.rng
		}
	}
	if idem := n.attrs["idempotency"]; idem != nil && !explicit {
		scheme, explicit, at = "write_time", true, idem.rng
		if idem.val.Bool {
			scheme = "source_position"
		}
	}
	srcHas := rc.src == nil || rc.src.HasPosition(rc.srcMode)
	srcDesc := "the source"
	if rc.src != nil {
		srcDesc = rc.src.Name
		if rc.srcMode != "" {
			srcDesc += " in " + rc.srcMode + " mode"
		}
	}
	effective := scheme
	if scheme == "auto" {
		// auto applies to object stores only: a file sink stays on
		// write_time until parts are asked for explicitly.
		effective = "write_time"
		if srcHas && rc.src != nil && n.name == "object_store" {
			effective = "source_position"
		}
	}
	rc.resolveNameBy(n, effective)
	if effective == "source_position" {
		if !srcHas {
			if !rc.inNamedUnused {
				rc.c.add("E040", at, fmt.Sprintf("%s name_by = source_position in route %s needs a replayable source, but %s has none", n.name, rc.name, srcDesc),
					"Positional names repeat only when the source re-reads records at the same positions: kafka, postgres_cdc, a sql cursor, a file in consume mode, mongodb. Use a key-addressed sink instead, or name_by = write_time.")
			}
			p.missing = fmt.Sprintf("%s has no replayable position for name_by = source_position", srcDesc)
			return p
		}
		if f := n.attrs["format"]; f != nil && f.val.Str == "csv" && !rc.inNamedUnused {
			rc.c.add("E041", f.rng, fmt.Sprintf("%s in route %s writes csv under name_by = source_position", n.name, rc.name),
				"Each part file would need its own header row; use format = json, or name_by = write_time.")
		}
		if d := n.attrs["date_partition"]; d != nil && d.explicit && d.val.Bool && !rc.inNamedUnused {
			rc.warn("W005", d.rng, fmt.Sprintf("%s date_partition is ignored under name_by = source_position in route %s", n.name, rc.name),
				"Parts are written flat under the prefix; the name already carries the range.")
		}
		how := "name_by = source_position"
		if scheme == "auto" {
			how = "name_by = auto resolves to source_position"
		}
		p.ok = true
		p.reasons = []string{fmt.Sprintf("write: %s names immutable parts by source position (%s); %s has a replayable position, so a replay rewrites the same names and is skipped", n.name, how, srcDesc)}
		return p
	}
	if n.name == "object_store" && rc.concurrency > 1 && !rc.inNamedUnused {
		hint := "set concurrency = 1"
		if srcHas {
			hint = "use name_by = source_position"
		}
		rc.warn("W004", at, fmt.Sprintf("route %s writes to a write_time object store with concurrency %d", rc.name, rc.concurrency),
			"Names are minted inside the worker pool, so key order becomes arrival order and a replay can reorder updates to one key: "+hint+".")
	}
	p.reasons = []string{fmt.Sprintf("write: %s under name_by = write_time names every write anew, so a replay lands twice", n.name)}
	if srcHas && rc.src != nil {
		p.missing = fmt.Sprintf("sink write is not idempotent: %s names by write_time; set name_by = source_position (%s has a replayable position)", n.name, srcDesc)
	} else {
		p.missing = fmt.Sprintf("sink write is not idempotent: %s names by write_time and %s has no replayable position; write to a key-addressed sink (SQL ON CONFLICT, Mongo id_field) instead", n.name, srcDesc)
	}
	return p
}

// resolveNameBy writes the effective naming scheme into the plan (auto and
// the deprecated idempotency resolved), so the runtime reads one attribute,
// and turns the source's source_metadata on under source_position, as the
// positional path needs the mqb.src.* keys.
func (rc *routeCtx) resolveNameBy(n *nodeInfo, effective string) {
	if a := n.attrs["name_by"]; a != nil {
		a.val.Str = effective
	} else {
		n.attrs["name_by"] = &attrInfo{val: plan.Value{Type: plan.TEnum, Str: effective}, stab: stableValue}
	}
	if effective != "source_position" || rc.inNamedUnused || len(rc.nodes) == 0 || rc.nodes[0].role != plan.RoleSource {
		return
	}
	if sm := rc.nodes[0].attrs["source_metadata"]; sm != nil {
		sm.val.Bool = true
	}
}

func boolAttr(n *nodeInfo, name string) bool {
	a := n.attrs[name]
	return a != nil && a.val.Type == plan.TBool && a.val.Bool
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if strings.EqualFold(x, s) {
			return i
		}
	}
	return -1
}

func templateText(parts []plan.Part) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, p := range parts {
		if p.Expr != "" {
			b.WriteString("${" + p.Expr + "}")
		} else {
			b.WriteString(p.Lit)
		}
	}
	b.WriteByte('"')
	return b.String()
}
