package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// The map step: `map { target = <expr> … }`. A target is a payload field
// (`total`, meaning payload.total, or a path `payload.customer.email`),
// the whole payload (`payload`), or a metadata key (`meta["k"]`); `del
// <path>` deletes one. Every value is computed from the record as it
// entered the block, then the assignments apply in the order written; no
// two targets of one block may overlap, so the order decides nothing.

// mapTarget is one item of a map block, resolved.
type mapTarget struct {
	meta bool
	// path is, for the payload, the fields from its root (none: the
	// whole payload); for meta, the one key.
	path []string
	del  bool
	text string // as written: total, payload.a.b, meta["k"], del payload.x
	rng  diag.Range
}

// overlaps reports whether a and b write to one place: the same meta key,
// or payload paths one of which lies inside (or is) the other.
func (a mapTarget) overlaps(b mapTarget) bool {
	if a.meta != b.meta {
		return false
	}
	if a.meta {
		return a.path[0] == b.path[0]
	}
	return isPathPrefix(a.path, b.path) || isPathPrefix(b.path, a.path)
}

// isPathPrefix reports whether p is q or a path above it.
func isPathPrefix(p, q []string) bool {
	return len(p) <= len(q) && slices.Equal(p, q[:len(p)])
}

// payloadTaint is what map steps have done to the payload so far, in the
// order they did it: a read of a path is as stable as the last write at
// that path or above it (or, with none, as the payload it started from),
// combined with every later write below it that no write since covers.
type payloadTaint struct {
	// base is the stability of the payload no write covers: stable, or
	// that of the value a map replaced the whole payload with.
	base   stability
	writes []pathWrite
}

// pathWrite is one map assignment to a payload path (never the whole
// payload, which resets the taint instead).
type pathWrite struct {
	path []string
	stab stability // stable for a delete: the field then reads as absent
}

func newTaint() payloadTaint { return payloadTaint{base: stableValue} }

// read is the stability of the payload value at path (nil: the whole
// payload).
func (t payloadTaint) read(path []string) stability {
	cover := -1
	for i := len(t.writes) - 1; i >= 0; i-- {
		if isPathPrefix(t.writes[i].path, path) {
			cover = i
			break
		}
	}
	out := t.base
	if cover >= 0 {
		out = t.writes[cover].stab
	}
	for i := cover + 1; i < len(t.writes); i++ {
		w := t.writes[i]
		if len(w.path) <= len(path) || !isPathPrefix(path, w.path) || t.overwritten(i) {
			continue
		}
		st := w.stab
		if !st.Stable {
			st = perDelivery("%s is set by map from a per-delivery value", plan.PayloadPathText(w.path))
		}
		out = both(out, st)
	}
	return out
}

// overwritten reports whether a later write covers write i, so nothing
// of its value is left to read.
func (t payloadTaint) overwritten(i int) bool {
	for _, w := range t.writes[i+1:] {
		if isPathPrefix(w.path, t.writes[i].path) {
			return true
		}
	}
	return false
}

// topFields lists, in the order first written, the top-level fields map
// writes have touched.
func (t payloadTaint) topFields() []string {
	var out []string
	for _, w := range t.writes {
		if !slices.Contains(out, w.path[0]) {
			out = append(out, w.path[0])
		}
	}
	return out
}

// payloadRead is the stability of the payload value at path (nil: the
// whole payload) at the current step.
func (rc *routeCtx) payloadRead(path []string) stability {
	if rc.replaced != "" {
		return perDelivery("%s", rc.replaced)
	}
	return rc.taint.read(path)
}

// checkMap checks a map block and follows its writes in the stability
// analysis. A block that only sets top-level payload fields keeps the
// plan form it always had (node attributes, field → value); any other
// block lists its assignments in order (plan.Node.Assign).
func (rc *routeCtx) checkMap(n *nodeInfo, it *lang.Item) {
	type written struct {
		t  mapTarget
		ai *attrInfo // nil for a delete, or a value that did not compile
	}
	var done []written
	for f := range it.Body.EachItem() {
		t, ok := rc.mapTarget(f)
		if !ok {
			continue
		}
		list, isList := "", false
		if !t.del && f.Assign != nil && f.Assign.List != nil {
			list, isList = rc.listExpr(f.Assign.List)
		}
		if !t.del && (f.Assign == nil || f.Assign.Expr == nil && !isList && (f.Assign.Block == nil || len(f.Assign.Block.Items()) > 0)) {
			detail := ""
			if f.Assign != nil && f.Assign.Block != nil {
				detail = `An object is written as an expression: {"name": payload.name, "n": 1}.`
			}
			rc.c.add("E015", t.rng, fmt.Sprintf("map field %s needs `= <expr>`", t.text), detail)
			continue
		}
		if i := slices.IndexFunc(done, func(d written) bool { return d.t.overlaps(t) }); i >= 0 {
			rc.c.add("E018", t.rng, overlapSummary(done[i].t, t),
				"Every value in one map block is computed from the record as it entered the block, so two writes to one place would leave the result to their order: write them in two map blocks, one after the other.")
			continue
		}
		w := written{t: t}
		if !t.del {
			what := "map field " + t.text + rc.where()
			var ok bool
			switch {
			case isList:
				w.ai, ok = rc.convertText(list, f.Assign.Range(), what)
			case f.Assign.Expr == nil:
				// `payload = {}`: the empty block is the empty object.
				w.ai, ok = rc.convertText("{}", f.Assign.Range(), what)
			default:
				w.ai, ok = rc.convertExpr(f.Assign.Expr, what, &attrInfo{}, false)
			}
			if !ok {
				w.ai = nil
				done = append(done, w) // still a target another may overlap
				continue
			}
			w.ai.explicit, w.ai.rng = true, f.Range()
		}
		done = append(done, w)
	}
	legacy := !slices.ContainsFunc(done, func(d written) bool { return d.t.meta || d.t.del || len(d.t.path) != 1 })
	n.attrs = map[string]*attrInfo{}
	for _, d := range done {
		if d.ai == nil && !d.t.del {
			continue
		}
		if legacy {
			n.attrs[d.t.path[0]] = d.ai
			continue
		}
		a := plan.Assignment{Target: plan.TargetPayload, Path: d.t.path, Delete: d.t.del, Pos: d.t.rng.Start}
		if d.t.meta {
			a.Target = plan.TargetMeta
		}
		if d.ai != nil {
			v := d.ai.val
			a.Value = &v
		}
		n.assign = append(n.assign, a)
	}
	// The block's values were all computed above, against the taint as
	// the record entered it; now its writes take effect.
	for _, d := range done {
		if d.ai == nil && !d.t.del {
			continue
		}
		st := stableValue
		if d.ai != nil {
			st = d.ai.stab
			rc.noteUnnestDrop("the value map sets "+d.t.text+" to", st)
		}
		switch {
		case d.t.meta:
			if rc.metaWrites == nil {
				rc.metaWrites = map[string]stability{}
			}
			rc.metaWrites[d.t.path[0]] = st
		case len(d.t.path) == 0:
			if !st.Stable {
				st.Why = "map replaces the payload with a per-delivery value: " + st.Why
			}
			rc.replaced = ""
			rc.taint = payloadTaint{base: st}
		default:
			rc.taint.writes = append(rc.taint.writes, pathWrite{path: d.t.path, stab: st})
		}
	}
}

// listExpr writes a list value (`[payload.a, "x"]`, which the grammar
// reads as a list) as the expr-lang array it is in a map block; ok is
// false when an element is a block.
func (rc *routeCtx) listExpr(l *lang.List) (string, bool) {
	var elems []string
	for _, e := range l.Elems {
		switch {
		case e.Expr != nil:
			elems = append(elems, e.Expr.Text(rc.file.Src))
		case e.List != nil:
			s, ok := rc.listExpr(e.List)
			if !ok {
				return "", false
			}
			elems = append(elems, s)
		default:
			return "", false
		}
	}
	return "[" + strings.Join(elems, ", ") + "]", true
}

// convertText compiles an expression the file does not hold as written
// (a list value rewritten as an array, `{}`): errors point at rng.
func (rc *routeCtx) convertText(src string, rng diag.Range, what string) (*attrInfo, bool) {
	// No position inside src maps onto the file: a diagnostic about a
	// part of it (meta["mqb.id"] read too early) points at the whole item.
	ce, ok := rc.compileExpr(src, diag.Pos{}, false, rng, "E020", func() string { return what }, false)
	if !ok {
		return nil, false
	}
	ai := &attrInfo{stab: rc.stabilityOf(ce)}
	ai.val = plan.Value{Type: plan.TExpr, Expr: src, Stable: ai.stab.Stable, Pos: rng.Start}
	return ai, true
}

func overlapSummary(first, second mapTarget) string {
	outer, inner := first, second
	if len(second.path) < len(first.path) {
		outer, inner = second, first
	}
	name := targetName(outer)
	if targetName(inner) == name && first.del == second.del {
		return fmt.Sprintf("map sets %s twice", name)
	}
	what := inner.text
	if !inner.del {
		what += " = …"
	}
	return fmt.Sprintf("map sets %s twice: %s writes it too", name, what)
}

// targetName is the canonical name of a target: payload.total for the
// bare `total`.
func targetName(t mapTarget) string {
	if t.meta {
		return plan.Assignment{Target: plan.TargetMeta, Path: t.path}.TargetText()
	}
	return plan.PayloadPathText(t.path)
}

// mapTarget resolves the target of one map item, reporting what is wrong
// with it.
func (rc *routeCtx) mapTarget(f *lang.Item) (mapTarget, bool) {
	var t mapTarget
	root := f.Key
	var segs []lang.Segment
	switch {
	case f.Del != nil:
		t.del = true
		root, segs = f.Del.Root, f.Del.Segments
		t.text = "del " + f.Del.Text()
		t.rng = lang.Range(f.Key.Pos, f.Del.EndPos)
	case f.Key.Name == "del" && f.Path == nil && f.Arg != nil:
		rc.c.add("E028", f.Range(), fmt.Sprintf("del%s takes a path alone on its line: del payload.field", rc.where()),
			"For example `del payload.tmp` or `del payload.customer[\"raw id\"]`; write one delete per line.")
		return t, false
	default:
		if f.Path != nil {
			segs = f.Path.Segments
		}
		t.text = f.KeyText()
		t.rng = f.KeyRange()
	}
	var names []string
	for _, s := range segs {
		if s.Quoted != nil {
			parts, ds := lang.SplitTemplate(*s.Quoted)
			if len(ds) > 0 {
				rc.c.diags = append(rc.c.diags, ds...)
				return t, false
			}
			if slices.ContainsFunc(parts, func(p lang.TemplatePart) bool { return p.IsExpr() }) {
				rc.c.add("E028", lang.Range(s.Pos, s.EndPos), fmt.Sprintf("map target %s%s: a key in a path is plain text", t.text, rc.where()),
					"A ${…} placeholder is not read here; the target names one fixed field or key.")
				return t, false
			}
		}
		names = append(names, s.Name)
	}
	switch root.Name {
	case "payload":
		t.path = names
		if t.del && len(names) == 0 {
			rc.c.add("E028", t.rng, fmt.Sprintf("del payload%s would leave the record without a payload", rc.where()),
				"Delete a field (del payload.tmp), or replace the whole payload: payload = {\"line\": payload}.")
			return t, false
		}
	case "meta":
		t.meta = true
		switch {
		case len(names) == 0:
			rc.c.add("E028", t.rng, fmt.Sprintf("map%s cannot set meta as a whole", rc.where()),
				"meta is the record's metadata, a map of strings: set one key, meta[\"k\"] = …. A payload field named meta is payload.meta.")
			return t, false
		case len(names) > 1:
			rc.c.add("E028", t.rng, fmt.Sprintf("map target %s%s: meta holds strings, so a meta target names one key", t.text, rc.where()),
				"Write meta[\"k\"] = …; its value is stored as a string.")
			return t, false
		case names[0] == "":
			rc.c.add("E028", t.rng, fmt.Sprintf("map target %s%s: the meta key is empty", t.text, rc.where()), "")
			return t, false
		case strings.HasPrefix(names[0], "mqb."):
			verb := "sets"
			if t.del {
				verb = "deletes"
			}
			rc.c.add("E029", t.rng, fmt.Sprintf("map%s %s meta[%q], a key mqb reserves", rc.where(), verb, names[0]),
				"meta[\"mqb.id\"] is the record's identity and only an id step sets it; the other mqb.* keys are the runtime's (mqb.error, mqb.src.*). Use a key of your own, such as meta[\"tenant\"].")
			return t, false
		}
		t.path = names
	default:
		if len(segs) > 0 || t.del {
			rc.c.add("E028", t.rng, fmt.Sprintf("map target %s%s starts at neither payload nor meta", t.text, rc.where()),
				fmt.Sprintf("A path starts at the record: payload.%s, or meta[\"k\"] for a metadata key. A bare name (total = …) is a top-level payload field.", strings.TrimPrefix(t.text, "del ")))
			return t, false
		}
		t.path = []string{root.Name}
	}
	return t, true
}

// checkKeyPaths reports (E028) every key written as a path, and every
// `del`, outside a map block, and remembers those items so the checks
// of their blocks pass over them instead of reporting them again.
func (c *compiler) checkKeyPaths(files []*lang.File) {
	c.misplaced = map[*lang.Item]bool{}
	for _, f := range files {
		if f == nil {
			continue
		}
		for _, d := range f.Decls {
			switch {
			case d == nil:
			case d.Route != nil && d.Route.Name != nil:
				c.walkKeyPaths(d.Route.Body, " in route "+d.Route.Name.Name, true)
			case d.Endpoint != nil && d.Endpoint.Name != nil:
				c.walkKeyPaths(d.Endpoint.Body, " in "+d.Endpoint.Dir+" "+d.Endpoint.Name.Name, false)
			}
		}
	}
}

func (c *compiler) walkKeyPaths(b *lang.Block, where string, routeBody bool) {
	if b == nil {
		return
	}
	for it := range b.EachItem() {
		switch {
		case it.Del != nil:
			c.misplaced[it] = true
			c.add("E028", lang.Range(it.Key.Pos, it.Del.EndPos), fmt.Sprintf("del %s%s: only a map step deletes fields", it.Del.Text(), where),
				fmt.Sprintf("Write it inside a map block: map { del %s }.", it.Del.Text()))
		case it.Path != nil:
			c.misplaced[it] = true
			c.add("E028", it.KeyRange(), fmt.Sprintf("key %s%s is a path; only the targets of a map step are", it.KeyText(), where),
				"Inside map { … }, payload.customer.email = … sets a nested field and meta[\"k\"] = … a metadata key; anywhere else a key is a plain name, such as path.")
		}
		if routeBody && it.Path == nil && it.Body != nil && it.Kind == nil && it.Label == nil {
			if st, ok := stdlib.LookupStep(it.Key.Name); ok && st.Free {
				for in := range it.Body.EachItem() {
					c.walkItemValues(in, where)
				}
				continue
			}
		}
		c.walkItemValues(it, where)
	}
}

// walkItemValues walks the blocks nested in an item: its body and any
// block inside its value.
func (c *compiler) walkItemValues(it *lang.Item, where string) {
	c.walkKeyPaths(it.Body, where, false)
	if it.Assign != nil {
		c.walkValueKeyPaths(it.Assign, where)
	}
}

func (c *compiler) walkValueKeyPaths(v *lang.Value, where string) {
	switch {
	case v.Block != nil:
		c.walkKeyPaths(v.Block, where, false)
	case v.List != nil:
		for _, e := range v.List.Elems {
			c.walkValueKeyPaths(e, where)
		}
	}
}
