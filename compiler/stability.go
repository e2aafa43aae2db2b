package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"

	"github.com/mqb-dev/mqb/stdlib"
)

// stability says whether a value is the same on every replay of a record.
// Why explains a per-delivery verdict in words a user can act on.
type stability struct {
	Stable bool
	Why    string
}

var stableValue = stability{Stable: true}

// mqbIDUnset is the reason given for meta["mqb.id"] read before an id step;
// E032 already reports it, so later checks stay quiet about it.
const mqbIDUnset = `meta["mqb.id"] is not set yet`

func perDelivery(format string, args ...any) stability {
	return stability{Why: fmt.Sprintf(format, args...)}
}

// both combines the stability of two parts of one value.
func both(a, b stability) stability {
	if !a.Stable {
		return a
	}
	return b
}

func (s stability) String() string {
	if s.Stable {
		return "stable"
	}
	return "per-delivery: " + s.Why
}

// exprFacts is what the stability analysis needs from an expression tree.
type exprFacts struct {
	idents   []*ast.IdentifierNode
	members  []*ast.MemberNode // payload.f and meta["k"] with a constant key
	builtins []*ast.BuiltinNode
	consumed map[ast.Node]bool // identifiers that are a member's base or a callee
}

func (f *exprFacts) Visit(n *ast.Node) {
	switch v := (*n).(type) {
	case *ast.IdentifierNode:
		f.idents = append(f.idents, v)
	case *ast.MemberNode:
		if id, ok := v.Node.(*ast.IdentifierNode); ok && (id.Value == "payload" || id.Value == "meta") {
			if _, ok := v.Property.(*ast.StringNode); ok {
				f.members = append(f.members, v)
				f.consumed[id] = true
			}
		}
	case *ast.CallNode:
		if id, ok := v.Callee.(*ast.IdentifierNode); ok {
			f.consumed[id] = true
		}
	case *ast.BuiltinNode:
		f.builtins = append(f.builtins, v)
	}
}

// stabilityOf decides whether ce is replay-stable in the route's context at
// the current step, and reports E032 when it reads meta["mqb.id"] before an
// `id` step has set it.
func (rc *routeCtx) stabilityOf(ce *compiledExpr) stability {
	if ce == nil {
		return stableValue
	}
	facts := &exprFacts{consumed: map[ast.Node]bool{}}
	tree := ce.tree
	ast.Walk(&tree, facts)
	result := stableValue
	for _, b := range facts.builtins {
		if slices.Contains(stdlib.PerDeliveryFuncs, b.Name) {
			result = both(result, perDelivery("%s() differs on every read", b.Name))
		}
	}
	for _, m := range facts.members {
		base := m.Node.(*ast.IdentifierNode).Value
		key := m.Property.(*ast.StringNode).Value
		if base == "payload" {
			if t, ok := rc.taint[key]; ok {
				result = both(result, t)
			}
			if rc.replaced != "" {
				result = both(result, perDelivery("%s", rc.replaced))
			}
			continue
		}
		result = both(result, rc.metaStability(ce, m, key))
	}
	for _, id := range facts.idents {
		if facts.consumed[id] {
			continue
		}
		switch id.Value {
		case "payload":
			if rc.replaced != "" {
				result = both(result, perDelivery("%s", rc.replaced))
			}
			for f, t := range rc.taint {
				if !t.Stable {
					result = both(result, perDelivery("payload.%s is set by map from a per-delivery value", f))
				}
			}
		case "meta":
			result = both(result, perDelivery("meta as a whole holds per-delivery keys; index it with a replay-stable key"))
		case "message_id":
			result = both(result, rc.messageIDStability())
		}
	}
	return result
}

func (rc *routeCtx) messageIDStability() stability {
	if rc.src == nil || rc.src.StableIDs {
		return stableValue
	}
	return perDelivery("message_id of a %s source is a fresh UUIDv7 per read", rc.src.Name)
}

func (rc *routeCtx) metaStability(ce *compiledExpr, m *ast.MemberNode, key string) stability {
	switch {
	case key == "mqb.id":
		if !rc.idSet {
			if !rc.inNamedUnused {
				base := m.Node.Location()
				from := base.From
				to := from + len(`meta["mqb.id"]`)
				if i := strings.Index(ce.src[runeOffset(ce.src, from):], "]"); i >= 0 {
					to = from + i + 1
				}
				rng := mapRange(ce.src, ce.at, from, to)
				if ce.at.Line == 0 {
					rng = rc.curRange
				}
				rc.c.add("E032", rng, fmt.Sprintf("route %s reads meta[\"mqb.id\"] before an id step sets it", rc.name),
					"Every record would see an empty value here (and dedup would silently fall back to message_id). Put `id <expr>` above this step.")
			}
			return perDelivery(mqbIDUnset)
		}
		return rc.idStab
	case strings.HasPrefix(key, "mqb.src."):
		if rc.src == nil || rc.src.HasPosition(rc.srcMode) {
			return stableValue
		}
		return perDelivery("%s (mode %s) has no replayable position, so meta[%q] changes on replay", rc.src.Name, rc.srcMode, key)
	case strings.HasPrefix(key, "postgres."):
		if rc.src == nil || rc.src.CDC {
			return stableValue
		}
		return perDelivery("meta[%q] is set only by a postgres_cdc source", key)
	}
	return perDelivery("meta[%q] is not known to be replay-stable", key)
}
