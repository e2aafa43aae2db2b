package compiler

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// checkStep checks one route step: `id <expr>`, `filter <expr>`,
// `map { target = <expr> … }` (mapstep.go), `dlq { to … }`, or a step with attributes.
func (rc *routeCtx) checkStep(it *lang.Item, st *stdlib.Step, side string) *nodeInfo {
	n := &nodeInfo{role: plan.RoleStep, side: side, name: st.Name, step: st, rng: it.Range()}
	switch {
	case st.PathArg:
		if !rc.checkUnnest(n, it) {
			return nil
		}
	case st.ExprArg:
		if it.Arg == nil {
			rc.c.add("E015", it.Key.Range(), fmt.Sprintf("%s in route %s takes an expression: %s <expr>", st.Name, rc.name, st.Name), "For example: id payload.order_id, filter payload.total > 0.")
			return nil
		}
		ai, ok := rc.convertExpr(it.Arg, st.Name+rc.where(), &attrInfo{}, st.Name == "filter")
		if st.Name == "id" {
			// Until the expression checks, the identity proves nothing.
			rc.idSet = true
			rc.idStab = perDelivery("the id expression does not compile")
			rc.idText = ""
		}
		if !ok {
			return nil
		}
		n.exprText, n.exprStab = ai.val.Expr, ai.stab
		if st.Name == "filter" {
			rc.noteUnnestDrop("filter "+ai.val.Expr, ai.stab)
		}
		if st.Name == "id" {
			rc.idStab = ai.stab
			rc.idText = ai.val.Expr
			rc.warnProcessKey("id", ai, it.Range())
		}
	case st.Free:
		if it.Body == nil {
			rc.c.add("E015", it.Key.Range(), fmt.Sprintf("%s in route %s takes a block of field = <expr>", st.Name, rc.name), "")
			return nil
		}
		rc.checkMap(n, it)
	case st.Nested:
		prev := rc.deadLetter
		rc.deadLetter = st.Name == "dlq"
		child := rc.branchTarget(it, st.Name)
		rc.deadLetter = prev
		if child != nil {
			n.children = []branchInfo{{label: plan.BranchTo, node: child}}
		}
	default:
		if it.Arg != nil || it.Kind != nil || it.Ref != nil || it.Assign != nil {
			rc.c.add("E015", it.Key.Range(), fmt.Sprintf("%s in route %s takes a block: %s { … }", st.Name, rc.name, st.Name), "")
			return nil
		}
		n.attrs = rc.checkAttrs(st.Attrs, it.Body, st.Name, it.Key.Range(), nil)
		switch st.Name {
		case "dedup":
			rc.checkDedup(n, it)
		case "parse":
			rc.checkParse(n, it)
		}
	}
	return n
}

// checkDedup warns about dedup keys that cannot recognise a replay.
func (rc *routeCtx) checkDedup(n *nodeInfo, it *lang.Item) {
	key := n.attrs["key"]
	if key == nil {
		return
	}
	rng := it.Key.Range()
	if key.explicit {
		rng = key.rng
	}
	if !key.stab.Stable && key.stab.Why != mqbIDUnset {
		detail := "A replay gets a new key, so the dedup store never sees a repeat. Key on a business field (payload.order_id) or meta[\"mqb.id\"] set by an id step."
		if !key.explicit {
			detail = "The default key is message_id. " + detail
		}
		rc.warn("W001", rng, fmt.Sprintf("dedup in route %s dedupes nothing: its key %s is per-delivery (%s)", rc.name, key.val.Expr, key.stab.Why), detail)
	}
	if key.explicit {
		rc.warnProcessKey("dedup key", key, rng)
	}
	if rc.src != nil && rc.src.CDC && strings.Contains(key.val.Expr, "mqb.id") {
		rc.warn("W002", rng, fmt.Sprintf("dedup in route %s is keyed on meta[\"mqb.id\"] over a CDC source", rc.name),
			"Identity is not a version: every update of a row shares one business key and would collapse into one. Keep the default message_id, which includes the LSN.")
	}
	rc.dedups = append(rc.dedups, n)
}

// warnProcessKey warns (W021) when a key is stable only within one process
// because it reads the environment.
func (rc *routeCtx) warnProcessKey(what string, ai *attrInfo, rng diag.Range) {
	if rc.inNamedUnused || !ai.stab.Stable || ai.stab.Process == "" {
		return
	}
	rc.keyReadsProcess(ai.stab)
	rc.idEnvWarned = rc.idEnvWarned || what == "id"
	rc.warn("W021", rng, fmt.Sprintf("%s %s in route %s is stable within one process only: %s", what, ai.val.Expr, rc.name, ai.stab.Process),
		"A replay is recognised only while every run sees the same value; a restart with another value gives every record a new key. The plan carries the premise that it does not change across an unclean stop: mqbc run refuses to start when it did.")
}

// warnProcessWriteKey warns (W021) when the key a sink's write is
// addressed by (a conflict column, a mongodb id_field) is stable only
// within one process because it reads the environment.
func (rc *routeCtx) warnProcessWriteKey(what string, st stability, rng diag.Range) {
	rc.keyReadsProcess(st)
	if rc.idEnvWarned && strings.Contains(what, `meta["mqb.id"]`) {
		return // the id step's W021 says it
	}
	rc.warn("W021", rng, fmt.Sprintf("%s in route %s is stable within one process only: %s", what, rc.name, st.Process),
		"A replay lands on the row or document of its first delivery only while every run sees the same value; a restart with another value writes every replayed record again under a new key. The plan carries the premise that it does not change across an unclean stop: mqbc run refuses to start when it did.")
}

// checkParse checks that a parse step has what its format needs, and
// follows it in the stability analysis: the fields after it are parsed
// from the whole payload, so they are as stable as the payload was.
func (rc *routeCtx) checkParse(n *nodeInfo, it *lang.Item) {
	format := n.attrs["format"]
	if format == nil {
		return
	}
	pattern, columns := n.attrs["pattern"], n.attrs["columns"]
	switch format.val.Str {
	case "regex":
		if pattern == nil {
			rc.c.add("E016", it.Key.Range(), fmt.Sprintf("parse%s with format = regex needs pattern", rc.where()), "For example: pattern = \"^(?P<level>\\w+) (?P<msg>.*)$\".")
			break
		}
		re, err := regexp.Compile(pattern.val.Str)
		switch {
		case err != nil:
			rc.c.add("E022", pattern.rng, fmt.Sprintf("parse%s: pattern does not compile: %v", rc.where(), err), "It is a Go regular expression (RE2 syntax).")
		case !slices.ContainsFunc(re.SubexpNames(), func(s string) bool { return s != "" }):
			rc.c.add("E022", pattern.rng, fmt.Sprintf("parse%s: pattern has no named group", rc.where()), "Each named group (?P<name>…) becomes a field; a pattern without one would give every record an empty object.")
		}
	case "csv":
		if columns == nil || len(columns.val.List) == 0 {
			rc.c.add("E016", it.Key.Range(), fmt.Sprintf("parse%s with format = csv needs columns", rc.where()), "For example: columns = [\"id\", \"qty\", \"body\"].")
		}
	}
	if pattern != nil && pattern.explicit && format.val.Str != "regex" {
		rc.c.add("E022", pattern.rng, fmt.Sprintf("parse%s: pattern is for format = regex, not %s", rc.where(), format.val.Str), "")
	}
	if columns != nil && columns.explicit && format.val.Str != "csv" {
		rc.c.add("E022", columns.rng, fmt.Sprintf("parse%s: columns is for format = csv, not %s", rc.where(), format.val.Str), "")
	}
	whole := rc.wholePayload()
	rc.noteUnnestDrop("the payload parse reads", whole)
	rc.taint = newTaint()
	if !whole.Stable && rc.replaced == "" {
		rc.replaced = "the payload parse reads is per-delivery: " + whole.Why
	}
}
