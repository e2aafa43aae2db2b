package compiler

import (
	"fmt"
	"slices"

	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
)

// The unnest step: `unnest payload.items [as item]` emits one record per
// element of the array. Each child's identity is derived from its
// parent's and the element's index, so the analysis follows three things
// through it: meta["mqb.id"] and message_id become the derived ids,
// stable when the parent's identity and the array both are, and the
// payload becomes the element (or the parent's payload with the array
// taken out and the element under the name).

// checkUnnest checks an unnest step, fills its plan attributes (path: the
// array's fields from the payload's root; as: the name, when given) and
// moves the stability analysis past it. It reports false when the step
// is malformed.
func (rc *routeCtx) checkUnnest(n *nodeInfo, it *lang.Item) bool {
	u := it.Unnest
	if u == nil || it.Path != nil {
		rc.c.add("E015", it.Range(), fmt.Sprintf("unnest%s takes the path of an array in the payload: unnest payload.items", rc.where()),
			"Write `unnest payload.items` (each element becomes the payload) or `unnest payload.items as item` (the parent's payload, the array taken out, the element under payload.item), alone on its line.")
		return false
	}
	if u.Root.Name != "payload" || len(u.Segments) == 0 {
		rc.c.add("E015", u.Range(), fmt.Sprintf("unnest %s%s: the array is a field of the payload", u.PathText(), rc.where()),
			"A path starts at payload and names a field: unnest payload.items, unnest payload.order[\"line items\"].")
		return false
	}
	var path []string
	for _, s := range u.Segments {
		if s.Quoted != nil {
			parts, ds := lang.SplitTemplate(*s.Quoted)
			if len(ds) > 0 {
				rc.c.diags = append(rc.c.diags, ds...)
				return false
			}
			if slices.ContainsFunc(parts, func(p lang.TemplatePart) bool { return p.IsExpr() }) {
				rc.c.add("E015", lang.Range(s.Pos, s.EndPos), fmt.Sprintf("unnest %s%s: a key in a path is plain text", u.PathText(), rc.where()),
					"A ${…} placeholder is not read here; the path names one fixed field.")
				return false
			}
		}
		path = append(path, s.Name)
	}
	if len(rc.dedups) > 0 {
		rc.c.add("E060", it.Key.Range(), fmt.Sprintf("unnest%s stands after a dedup", rc.where()),
			"A dedup remembers the parent's key once the parent is acked, and the parent is acked only when every element is; a dedup above unnest could not give the key back when one element failed. Put the dedup after unnest, keyed on meta[\"mqb.id\"], the element's derived identity.")
		return false
	}

	arr := rc.payloadRead(path)
	if !arr.Stable {
		arr = perDelivery("the array unnest %s reads is per-delivery: %s", u.PathText(), arr.Why)
	}
	switch {
	case rc.unnumbered != "":
	case !arr.Stable:
		rc.unnumbered = arr.Why
	case rc.unnested != "" && rc.unnestDrop != "":
		// A record dropped after the first unnest stays one record here,
		// where a live one becomes its elements: the numbering counts on
		// which were live.
		rc.unnumbered = fmt.Sprintf("unnest %s numbers the elements of the records live after unnest %s, and %s", u.PathText(), rc.unnested, rc.unnestDrop)
	}
	parentText, parent := "message_id", rc.messageIDStability()
	if rc.idSet {
		parentText, parent = rc.idText, rc.idStab
		if parentText == "" {
			parentText = `meta["mqb.id"]`
		}
	}
	rc.unnested = u.PathText()
	rc.idSet = true
	rc.idStab = derivedID(parent, arr)
	rc.idText = parentText + " + the element's index in " + u.PathText()
	msg := derivedID(rc.messageIDStability(), arr)
	rc.msgIDAfter = &msg

	n.attrs = map[string]*attrInfo{}
	segs := make([]plan.Value, len(path))
	for i, p := range path {
		segs[i] = plan.Value{Type: plan.TString, Str: p}
	}
	n.attrs["path"] = &attrInfo{val: plan.Value{Type: plan.TList, List: segs, Stable: arr.Stable, Pos: u.Range().Start}, stab: arr, explicit: true, rng: u.Range()}
	if u.As == nil {
		// The element is the payload.
		rc.replaced = ""
		rc.taint = payloadTaint{base: arr}
		return true
	}
	n.attrs["as"] = &attrInfo{val: plan.Value{Type: plan.TString, Str: u.As.Name, Stable: true, Pos: u.As.Range().Start}, stab: stableValue, explicit: true, rng: u.As.Range()}
	rc.taint.writes = append(rc.taint.writes,
		pathWrite{path: path, stab: stableValue},
		pathWrite{path: []string{u.As.Name}, stab: arr})
	return true
}

// noteUnnestDrop records, once the route has passed an unnest, a step
// whose decision to drop or dead-letter an element may change on a
// replay: what is per-delivery (st) in what the step reads (what).
func (rc *routeCtx) noteUnnestDrop(what string, st stability) {
	if rc.unnested == "" || rc.unnestDrop != "" || st.Stable {
		return
	}
	rc.unnestDrop = fmt.Sprintf("%s is per-delivery (%s)", what, st.Why)
}

// derivedID is the stability of an id derived from a parent id and an
// element's index in an array: the parent's, when the array is stable
// too (the same elements at the same indexes on every replay).
func derivedID(parent, arr stability) stability {
	if !parent.Stable {
		return perDelivery("the parent's identity is per-delivery: %s", parent.Why)
	}
	return both(parent, arr)
}
