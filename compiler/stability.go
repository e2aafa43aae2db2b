package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/expr-lang/expr/ast"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// stability says whether a value is the same on every replay of a record.
// Why explains a per-delivery verdict in words a user can act on.
//
// A stable value may still rest on something outside the record: Process
// names what makes it stable within one process only (env("X"), the local
// time zone), and ProducerID names the source kind whose message_id is
// stable only when the record's producer stamped an id, which the proof
// then lists as a per-record premise.
type stability struct {
	Stable     bool
	Why        string
	Process    string
	ProducerID string
	// Reads lists, one per line and sorted, what a value stable within
	// one process reads from it (plan.ProcessEnvPrefix+NAME,
	// plan.ProcessLocalZone, plan.ProcessTZDatabase): where the value is a
	// key or a decision, the proof carries the premise that they do not
	// change (routeCtx.processPremise).
	Reads string
	// Outcome names the report_outcome key (meta["sql.outcome"]) a
	// per-delivery value reads: the outcome of the record's own earlier
	// write, which a replay after a crash reads as "existed".
	Outcome string
}

var stableValue = stability{Stable: true}

// mqbIDUnset is the reason given for meta["mqb.id"] read before an id step;
// E032 already reports it, so later checks stay quiet about it.
const mqbIDUnset = `meta["mqb.id"] is not set yet`

func perDelivery(format string, args ...any) stability {
	return stability{Why: fmt.Sprintf(format, args...)}
}

// both combines the stability of two parts of one value: per-delivery if
// either is, and otherwise carrying the conditions of both.
func both(a, b stability) stability {
	if !a.Stable {
		if a.Outcome == "" && !b.Stable && b.Outcome != "" {
			return b
		}
		return a
	}
	if !b.Stable {
		return b
	}
	if a.Process == "" {
		a.Process = b.Process
	}
	if a.ProducerID == "" {
		a.ProducerID = b.ProducerID
	}
	a.Reads = addReads(a.Reads, b.Reads)
	return a
}

// addReads merges two Reads sets.
func addReads(a, b string) string {
	if b == "" || a == b {
		return a
	}
	if a == "" {
		return b
	}
	set := strings.Split(a, "\n")
	for _, r := range strings.Split(b, "\n") {
		if !slices.Contains(set, r) {
			set = append(set, r)
		}
	}
	slices.Sort(set)
	return strings.Join(set, "\n")
}

func (s stability) String() string {
	if !s.Stable {
		return "per-delivery: " + s.Why
	}
	var conds []string
	if s.Process != "" {
		conds = append(conds, "within one process: "+s.Process)
	}
	if s.ProducerID != "" {
		conds = append(conds, "while every record carries its producer's id")
	}
	if len(conds) == 0 {
		return "stable"
	}
	return "stable " + strings.Join(conds, "; ")
}

// stabilityOf decides whether ce is replay-stable in the route's context at
// the current step, and reports E032 when it reads meta["mqb.id"] before an
// `id` step has set it.
//
// It is an allow-list over expr-lang's AST: every node kind is named below,
// and only the ones known to give the same value for the same inputs are
// stable; any other node, any function not on stdlib.DeterministicFuncs,
// expr-lang's $env and anything that depends on the order of a map's keys
// is per-delivery, with the reason.
func (rc *routeCtx) stabilityOf(ce *compiledExpr) stability {
	if ce == nil || ce.tree == nil {
		return stableValue
	}
	w := &stabWalk{rc: rc, ce: ce}
	v := w.node(ce.tree)
	if v.unordered != "" {
		return both(v.stab, perDelivery("%s lists a map's entries in an order that changes from run to run", v.unordered))
	}
	return v.stab
}

// stabWalk walks one expression tree.
type stabWalk struct {
	rc    *routeCtx
	ce    *compiledExpr
	scope []binding // let-bound names, innermost last
}

type binding struct {
	name string
	v    stabVal
}

// stabVal is the stability of one sub-expression. unordered names the
// builtin (keys, values, toPairs) when the value is a list whose order is
// a map's iteration order: its content is stable, its order is not, so
// only an order-blind consumer (sort, len, in, …) makes it stable again.
type stabVal struct {
	stab      stability
	unordered string
}

func stableVal() stabVal { return stabVal{stab: stableValue} }

func pd(format string, args ...any) stabVal { return stabVal{stab: perDelivery(format, args...)} }

// join combines sub-expressions whose order matters to the result.
func (w *stabWalk) join(vals ...stabVal) stabVal {
	out := stableVal()
	for _, v := range vals {
		out.stab = both(out.stab, v.stab)
		if out.unordered == "" {
			out.unordered = v.unordered
		}
	}
	return out
}

// settle turns an order-dependent list consumed by an order-sensitive
// operation into per-delivery.
func settle(v stabVal) stabVal {
	if v.unordered != "" {
		return stabVal{stab: both(v.stab, perDelivery("%s lists a map's entries in an order that changes from run to run", v.unordered))}
	}
	return v
}

// orderBlind are builtins whose result does not depend on the order of
// their first argument's elements (sum and mean are not: float addition
// rounds differently in another order; nor is fromPairs: of two pairs
// with one key the later wins, and values() of a map can list them in
// either order).
var orderBlind = map[string]bool{
	"len": true, "sort": true, "count": true, "all": true, "any": true, "none": true, "one": true,
	"min": true, "max": true, "median": true, "fromPairs": false, "uniq": false,
}

func (w *stabWalk) nodes(ns []ast.Node) stabVal {
	var vals []stabVal
	for _, n := range ns {
		vals = append(vals, settle(w.node(n)))
	}
	return w.join(vals...)
}

func (w *stabWalk) node(n ast.Node) stabVal {
	switch v := n.(type) {
	case nil:
		return stableVal()
	case *ast.NilNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.StringNode, *ast.BytesNode, *ast.ConstantNode:
		return stableVal()
	case *ast.IdentifierNode:
		return w.ident(v)
	case *ast.MemberNode:
		return w.member(v)
	case *ast.ChainNode:
		return w.node(v.Node)
	case *ast.SliceNode:
		// A slice of a list in a map's order holds other elements on
		// another run, not only in another order: settled first, so no
		// order-blind consumer makes it stable again.
		return w.join(settle(w.node(v.Node)), settle(w.node(v.From)), settle(w.node(v.To)))
	case *ast.UnaryNode:
		switch v.Operator {
		case "!", "not", "-", "+":
			return settle(w.node(v.Node))
		}
		return pd("operator %s is not known to be deterministic", v.Operator)
	case *ast.BinaryNode:
		if !deterministicOps[v.Operator] {
			return pd("operator %s is not known to be deterministic", v.Operator)
		}
		right := w.node(v.Right)
		if v.Operator == "in" || v.Operator == "not in" {
			right.unordered = "" // membership ignores order
		}
		return w.join(settle(w.node(v.Left)), settle(right))
	case *ast.ConditionalNode:
		return w.join(settle(w.node(v.Cond)), settle(w.node(v.Exp1)), settle(w.node(v.Exp2)))
	case *ast.VariableDeclaratorNode:
		val := w.node(v.Value)
		w.scope = append(w.scope, binding{v.Name, val})
		out := w.node(v.Expr)
		w.scope = w.scope[:len(w.scope)-1]
		return out
	case *ast.SequenceNode:
		if len(v.Nodes) == 0 {
			return stableVal()
		}
		// Every node runs; the last one is the value.
		out := w.nodes(v.Nodes[:len(v.Nodes)-1])
		return w.join(out, w.node(v.Nodes[len(v.Nodes)-1]))
	case *ast.ArrayNode:
		return w.nodes(v.Nodes)
	case *ast.MapNode:
		return w.nodes(v.Pairs)
	case *ast.PairNode:
		return w.join(settle(w.node(v.Key)), settle(w.node(v.Value)))
	case *ast.PredicateNode:
		return settle(w.node(v.Node))
	case *ast.PointerNode:
		// # and #index inside a predicate stand for the elements of the
		// builtin's first argument, whose stability the builtin counts.
		return stableVal()
	case *ast.BuiltinNode:
		return w.builtin(v)
	case *ast.CallNode:
		return w.call(v)
	}
	return pd("cannot prove: the expression construct %s is not analysed", strings.TrimPrefix(fmt.Sprintf("%T", n), "*ast."))
}

// deterministicOps are the binary operators of expr-lang that give the same
// result for the same operands.
var deterministicOps = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "**": true, "^": true,
	"==": true, "!=": true, "<": true, ">": true, "<=": true, ">=": true,
	"&&": true, "||": true, "and": true, "or": true, "??": true,
	"in": true, "not in": true, "matches": true, "not matches": true,
	"contains": true, "not contains": true, "startsWith": true, "not startsWith": true,
	"endsWith": true, "not endsWith": true, "..": true,
}

func (w *stabWalk) ident(v *ast.IdentifierNode) stabVal {
	for i := len(w.scope) - 1; i >= 0; i-- {
		if w.scope[i].name == v.Value {
			return w.scope[i].v
		}
	}
	rc := w.rc
	switch v.Value {
	case "payload":
		return stabVal{stab: rc.wholePayload()}
	case "meta":
		return pd("meta as a whole holds per-delivery keys; index it with a replay-stable key")
	case "message_id":
		return stabVal{stab: rc.messageIDStability()}
	case "$env":
		return pd("expr-lang's $env is the whole per-record environment, which the analysis does not follow; name payload, meta or message_id directly")
	}
	return pd("cannot prove: %s is not a name the analysis knows", v.Value)
}

// wholePayload is the stability of the payload read as a whole.
func (rc *routeCtx) wholePayload() stability { return rc.payloadRead(nil) }

func (w *stabWalk) member(m *ast.MemberNode) stabVal {
	rc := w.rc
	if m.Method {
		return w.join(w.node(m.Node), pd("cannot prove: method call %s is not analysed", memberName(m)))
	}
	if path, ok := w.payloadPath(m); ok {
		return stabVal{stab: rc.payloadRead(path)}
	}
	if id, ok := m.Node.(*ast.IdentifierNode); ok && !w.bound(id.Value) {
		key, constKey := m.Property.(*ast.StringNode)
		switch id.Value {
		case "payload":
			// payload[<computed key>]: any field may be read.
			return w.join(stabVal{stab: rc.wholePayload()}, settle(w.node(m.Property)))
		case "meta":
			if !constKey {
				return pd("meta read with a computed key may reach per-delivery keys; index it with a constant key")
			}
			return stabVal{stab: rc.metaStability(w.ce, m, key.Value)}
		case "$env":
			return w.ident(id)
		}
	}
	// An element of a list in a map's order (keys(m)[0]) is another one
	// on another run: settled, as a slice is.
	return w.join(settle(w.node(m.Node)), settle(w.node(m.Property)))
}

// payloadPath returns the fields of m when it reads a constant path from
// the payload (payload.a.b, payload["a"].b, payload?.a), so a read is
// tainted exactly by the map writes at, above or below that path. A path
// with a computed or numeric step (payload.items[0]) is not one: its
// constant part is read as a whole, which covers every field under it.
func (w *stabWalk) payloadPath(m *ast.MemberNode) ([]string, bool) {
	var rev []string
	var n ast.Node = m
	for {
		switch v := n.(type) {
		case *ast.ChainNode:
			n = v.Node
			continue
		case *ast.MemberNode:
			key, ok := v.Property.(*ast.StringNode)
			if v.Method || !ok {
				return nil, false
			}
			rev = append(rev, key.Value)
			n = v.Node
			continue
		case *ast.IdentifierNode:
			if v.Value != "payload" || w.bound(v.Value) {
				return nil, false
			}
			slices.Reverse(rev)
			return rev, true
		}
		return nil, false
	}
}

func (w *stabWalk) bound(name string) bool {
	for _, b := range w.scope {
		if b.name == name {
			return true
		}
	}
	return false
}

func memberName(m *ast.MemberNode) string {
	if s, ok := m.Property.(*ast.StringNode); ok {
		return s.Value + "()"
	}
	return "a method"
}

func (w *stabWalk) builtin(b *ast.BuiltinNode) stabVal {
	if b.Name == "now" {
		return pd("now() differs on every read")
	}
	switch b.Name {
	case "keys", "values", "toPairs":
		v := w.nodes(b.Arguments)
		if v.stab.Stable {
			v.unordered = b.Name + "()"
		}
		return v
	}
	note, ok := stdlib.DeterministicFuncs[b.Name]
	if !ok {
		return pd("cannot prove: %s() is not on the list of deterministic functions", b.Name)
	}
	var vals []stabVal
	for i, a := range b.Arguments {
		v := w.node(a)
		if i == 0 && orderBlind[b.Name] {
			v.unordered = ""
		}
		vals = append(vals, settle(v))
	}
	if b.Map != nil {
		vals = append(vals, settle(w.node(b.Map)))
	}
	out := w.join(vals...)
	if note != "" && out.stab.Stable {
		out.stab.Reads = addReads(out.stab.Reads, processReadOf(b.Name))
		if out.stab.Process == "" {
			out.stab.Process = note
		}
	}
	return out
}

func (w *stabWalk) call(c *ast.CallNode) stabVal {
	if m, ok := c.Callee.(*ast.MemberNode); ok {
		return w.join(w.member(m), w.nodes(c.Arguments))
	}
	id, ok := c.Callee.(*ast.IdentifierNode)
	if !ok || w.bound(id.Value) {
		return pd("cannot prove: a computed function call is not analysed")
	}
	note, known := stdlib.DeterministicFuncs[id.Value]
	if !known {
		return pd("cannot prove: %s() is not on the list of deterministic functions", id.Value)
	}
	out := w.nodes(c.Arguments)
	if id.Value == "env" && out.stab.Stable {
		var name string
		if len(c.Arguments) == 1 {
			if s, ok := c.Arguments[0].(*ast.StringNode); ok {
				name = s.Value
			}
		}
		if name == "" {
			// Which variable it reads is not known before the run, so
			// no start-up check can tell whether it changed.
			return pd("cannot prove: env() of a computed name reads a variable the compiler cannot name")
		}
		out.stab.Reads = addReads(out.stab.Reads, envProcessRead(name))
		out.stab.Process = fmt.Sprintf("env(%q) is read from the process environment", name)
	} else if note != "" && out.stab.Stable {
		out.stab.Reads = addReads(out.stab.Reads, processReadOf(id.Value))
		if out.stab.Process == "" {
			out.stab.Process = note
		}
	}
	return out
}

// envProcessRead is how a premise of kind plan.PremiseProcessUnchanged
// names the variable NAME (plan.ProcessEnvPrefix + NAME).
func envProcessRead(name string) string { return plan.ProcessEnvPrefix + name }

// processReadOf names what a function on stdlib.DeterministicFuncs with a
// note reads from the process.
func processReadOf(fn string) string {
	if fn == "timezone" {
		return plan.ProcessTZDatabase
	}
	return plan.ProcessLocalZone
}

// keyReadsProcess records that a key or a decision of the route rests on
// what st reads from the process (see routeCtx.processReads).
func (rc *routeCtx) keyReadsProcess(st stability) {
	if rc.inNamedUnused || !st.Stable || st.Reads == "" {
		return
	}
	if rc.processReads == nil {
		rc.processReads = map[string]bool{}
	}
	for _, r := range strings.Split(st.Reads, "\n") {
		rc.processReads[r] = true
	}
}

func (rc *routeCtx) messageIDStability() stability {
	if rc.msgIDAfter != nil {
		return *rc.msgIDAfter
	}
	if rc.src == nil {
		return stableValue
	}
	switch rc.src.IDs {
	case stdlib.IDsStable:
		return stableValue
	case stdlib.IDsFromProducer:
		if rc.src.Name == "nats" && rc.coreNATS() {
			return perDelivery("core NATS carries no ids a replay could repeat")
		}
		if a := rc.src.ProducerIDsIf; a != "" && !rc.sourceBool(a) {
			return perDelivery("message_id from %s is a fresh UUIDv7 per delivery unless its producers stamp one; set %s = true if they do (checked per record)", rc.src.Name, a)
		}
		return stability{Stable: true, ProducerID: rc.src.Name}
	}
	return perDelivery("message_id of a %s source is a fresh UUIDv7 per read", rc.src.Name)
}

// coreNATS reports whether the route's nats source runs without JetStream.
func (rc *routeCtx) coreNATS() bool {
	return rc.sourceBool("no_jetstream")
}

// sourceBool reports whether the route's source sets the bool attribute.
func (rc *routeCtx) sourceBool(attr string) bool {
	if len(rc.nodes) == 0 || rc.nodes[0].role != "source" {
		return false
	}
	return boolAttr(rc.nodes[0], attr)
}

func (rc *routeCtx) metaStability(ce *compiledExpr, m *ast.MemberNode, key string) stability {
	if st, ok := rc.metaWrites[key]; ok && !stdlib.IsOutcomeKey(key) {
		// A map step set or deleted the key (never an mqb.* one, E029).
		return st
	}
	switch {
	case key == "mqb.id":
		if !rc.idSet {
			if !rc.inNamedUnused {
				rng := memberRange(ce, m, rc.curRange)
				rc.c.add("E032", rng, fmt.Sprintf("route %s reads meta[\"mqb.id\"] before an id step sets it", rc.name),
					"Every record would see an empty value here (and dedup would silently fall back to message_id). Put `id <expr>` above this step.")
			}
			return perDelivery(mqbIDUnset)
		}
		return rc.idStab
	case strings.HasPrefix(key, "mqb.src."):
		return rc.srcMetaStability(ce, m, key)
	case strings.HasPrefix(key, "postgres."):
		switch {
		case rc.src != nil && !rc.src.CDC:
			return perDelivery("meta[%q] is set only by a postgres_cdc source", key)
		case !slices.Contains(postgresCDCMeta, key):
			// An allow-list: what the source does not set is no value a
			// replay repeats, whatever its name.
			return perDelivery("a postgres_cdc source never sets meta[%q] (it sets %s)", key, strings.Join(postgresCDCMeta, ", "))
		}
		return stableValue
	}
	if stdlib.IsOutcomeKey(key) {
		st := perDelivery("meta[%q] is the outcome of this record's own write, truthful only on its first delivery: a replay after a crash reads \"existed\"", key)
		st.Outcome = key
		return st
	}
	return perDelivery("meta[%q] is not known to be replay-stable", key)
}

// postgresCDCMeta are the keys a postgres_cdc source sets on every change
// (connector/postgrescdc, metaPG*), each the same on a replay of it:
// postgres.key is absent for a table without a replica identity key, and
// a sql sink's bind or a dedup then refuses the record rather than key
// it on "".
var postgresCDCMeta = []string{"postgres.lsn", "postgres.operation", "postgres.schema", "postgres.table", "postgres.key"}

// srcMetaStability is the stability of a provenance key: stable only when
// the route's source really sets that key (stdlib Kind.SourceMeta) and its
// value repeats on a replay; a key the source never sets is E050.
func (rc *routeCtx) srcMetaStability(ce *compiledExpr, m *ast.MemberNode, key string) stability {
	if rc.src == nil {
		return perDelivery("meta[%q] is set only by some sources", key)
	}
	sm, ok := rc.src.SourceMetaKey(key)
	unless := ok && sm.Unless != "" && rc.sourceBool(sm.Unless)
	if !ok || unless {
		if !rc.inNamedUnused {
			rng := memberRange(ce, m, rc.curRange)
			sets := "no mqb.src.* keys"
			var keys []string
			for _, k := range rc.src.SourceMeta {
				if k.Unless == "" || !rc.sourceBool(k.Unless) {
					keys = append(keys, k.Key)
				}
			}
			if len(keys) > 0 {
				sets = "only " + strings.Join(keys, ", ")
			}
			why := ""
			if unless {
				why = fmt.Sprintf(" with %s = true", sm.Unless)
			}
			rc.c.add("E050", rng, fmt.Sprintf("route %s reads meta[%q], which a %s source%s never sets", rc.name, key, rc.src.Name, why),
				fmt.Sprintf("A %s source sets %s, so every record would see an empty value here.", rc.src.Name, sets))
		}
		return perDelivery("a %s source never sets meta[%q]", rc.src.Name, key)
	}
	rc.readsSrcMeta = true
	if !sm.Stable {
		return perDelivery("meta[%q] (%s) of a %s source changes on replay", key, sm.Doc, rc.src.Name)
	}
	if sm.Positional && !rc.src.HasPosition(rc.srcMode) {
		return perDelivery("%s (mode %s) has no replayable position, so meta[%q] changes on replay", rc.src.Name, rc.srcMode, key)
	}
	return stableValue
}

// memberRange is the file range of `meta["key"]` inside ce, or whole when
// the expression's position cannot be mapped.
func memberRange(ce *compiledExpr, m *ast.MemberNode, whole diag.Range) diag.Range {
	if ce.at.Line == 0 {
		return whole
	}
	from := m.Node.Location().From
	to := from + len(`meta[""]`)
	if i := strings.Index(ce.src[runeOffset(ce.src, from):], "]"); i >= 0 {
		to = from + i + 1
	}
	return mapRange(ce.src, ce.at, from, to)
}
