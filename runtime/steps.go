package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/dedup"
)

// step transforms a batch in place: it runs over the live records and may
// change their payload or meta, or mark them filtered, duplicate or dead.
type step interface {
	apply(w *worker, b *batch) error
	// programs lists the step's expressions (to decide what to decode).
	programs() []*program
}

// recordStep is a step that decides each record on its own, so it can
// also run on the output side, after a handler, over the records the
// handler passed (filter, map). dedup is not one: it reserves keys per
// batch, and the compiler keeps it on the input side.
type recordStep interface {
	step
	applyRecord(w *worker, r *Record)
}

// applyEach runs a record step over the live records of b.
func applyEach(s recordStep, w *worker, b *batch) {
	for i := range b.recs {
		if b.recs[i].state == stLive {
			s.applyRecord(w, &b.recs[i])
		}
	}
}

// idStep is `id <expr>`: sets meta["mqb.id"] to the string form of the
// value, only when it resolves to something non-empty. A record whose
// expression is nil, empty or fails keeps no identity.
type idStep struct {
	prog *program
	// premise, when set, is the reason a proof rests on the key: a record
	// whose expression fails, is null or renders empty then goes to the
	// DLQ with why, instead of going on without an identity.
	premise string
}

const metaID = "mqb.id"

func (s *idStep) programs() []*program { return []*program{s.prog} }

func (s *idStep) apply(w *worker, b *batch) error {
	for i := range b.recs {
		r := &b.recs[i]
		if r.state != stLive {
			continue
		}
		v, present, err := w.eval.run(s.prog, r)
		var str string
		if err == nil && present {
			str, err = stringify(v)
		}
		switch {
		case err == nil && present && str != "":
			r.setIDValue(str, v)
		case s.premise == "":
			// No identity; a later reader of mqb.id says so.
		case err != nil:
			r.kill(fmt.Sprintf("id %s: the key does not render: %v (the verdict rests on it: %s)", s.prog.src, err, s.premise))
		default:
			r.kill(fmt.Sprintf("id %s: the key is missing or empty (the verdict rests on it: %s)", s.prog.src, s.premise))
		}
	}
	return nil
}

// filterStep is `filter <expr>`: keeps records for which it is true.
type filterStep struct {
	prog *program
}

func (s *filterStep) programs() []*program { return []*program{s.prog} }

func (s *filterStep) apply(w *worker, b *batch) error {
	applyEach(s, w, b)
	return nil
}

func (s *filterStep) applyRecord(w *worker, r *Record) {
	v, _, err := w.eval.run(s.prog, r)
	if err != nil {
		r.kill(fmt.Sprintf("filter %s: %v", s.prog.src, err))
		return
	}
	keep, ok := v.(bool)
	if !ok {
		r.kill(fmt.Sprintf("filter %s: value %v (%T) is not a boolean", s.prog.src, v, v))
		return
	}
	if !keep {
		r.state = stFiltered
	}
}

// mapStep is `map { target = <expr> … }`: every value is computed from the
// record as it entered the block, then the targets are written in order.
// A block of top-level payload fields (the plan's node attributes) sets
// them on the payload object in place; any other block (the plan's
// Assign list) writes paths, deletes, the whole payload and meta keys.
type mapStep struct {
	fields []mapField
	ops    []mapOp
	// writesPayload: the block changes the payload, so the route must
	// decode it whole to encode it again.
	writesPayload bool
}

type mapField struct {
	name  string
	prog  *program // nil for a literal
	value any
}

// mapOp is one plan.Assignment.
type mapOp struct {
	meta  bool
	path  []string // payload fields from the root (none: the whole payload); the meta key
	del   bool
	prog  *program // nil for a literal or a delete
	value any
	text  string // the target as written, for a dead record's reason
}

func newMapStep(route string, n *plan.Node, c *compiler) (*mapStep, error) {
	s := &mapStep{writesPayload: len(n.Assign) == 0}
	for _, a := range n.Assign {
		op := mapOp{meta: a.Target == plan.TargetMeta, path: a.Path, del: a.Delete, text: a.TargetText()}
		switch {
		case a.Target != plan.TargetPayload && a.Target != plan.TargetMeta:
			return nil, fmt.Errorf("route %s: map (%s): unknown target %q", route, n.Pos, a.Target)
		case op.meta && len(a.Path) != 1:
			return nil, fmt.Errorf("route %s: map (%s): %s names %d meta keys, not one", route, n.Pos, op.text, len(a.Path))
		case a.Delete && !op.meta && len(a.Path) == 0:
			return nil, fmt.Errorf("route %s: map (%s): a delete of the whole payload", route, n.Pos)
		case !a.Delete && a.Value == nil:
			return nil, fmt.Errorf("route %s: map (%s): %s has no value", route, n.Pos, op.text)
		}
		if !a.Delete {
			p, lit, err := mapValue(*a.Value, c)
			if err != nil {
				return nil, fmt.Errorf("route %s: map (%s) %s: %w", route, n.Pos, op.text, err)
			}
			op.prog, op.value = p, lit
		}
		s.writesPayload = s.writesPayload || !op.meta
		s.ops = append(s.ops, op)
	}
	names := make([]string, 0, len(n.Attrs))
	for k := range n.Attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		p, lit, err := mapValue(n.Attrs[k], c)
		if err != nil {
			return nil, fmt.Errorf("route %s: map (%s) field %s: %w", route, n.Pos, k, err)
		}
		s.fields = append(s.fields, mapField{name: k, prog: p, value: lit})
	}
	return s, nil
}

// mapValue compiles a map value: an expression (or a template of one
// expression), or else a literal.
func mapValue(v plan.Value, c *compiler) (*program, any, error) {
	src := v.Expr
	if src == "" && v.Type == plan.TTemplate && len(v.Template) == 1 && v.Template[0].Expr != "" {
		src = v.Template[0].Expr
	}
	if src != "" {
		p, err := c.compile(src)
		return p, nil, err
	}
	lit, err := literal(v)
	return nil, lit, err
}

func (s *mapStep) programs() []*program {
	var ps []*program
	for _, f := range s.fields {
		if f.prog != nil {
			ps = append(ps, f.prog)
		}
	}
	for _, op := range s.ops {
		if op.prog != nil {
			ps = append(ps, op.prog)
		}
	}
	if s.writesPayload {
		ps = append(ps, &program{usesPayload: true})
	}
	return ps
}

func (s *mapStep) apply(w *worker, b *batch) error {
	applyEach(s, w, b)
	return nil
}

func (s *mapStep) applyRecord(w *worker, r *Record) {
	if len(s.ops) > 0 {
		s.applyOps(w, r)
		return
	}
	obj, ok := r.payload().(map[string]any)
	if !ok {
		r.kill(fmt.Sprintf("map: payload is %T, not a JSON object", r.payload()))
		return
	}
	vals := w.mapVals[:0]
	for _, f := range s.fields {
		if f.prog == nil {
			vals = append(vals, f.value)
			continue
		}
		v, _, err := w.eval.run(f.prog, r)
		if err != nil {
			r.kill(fmt.Sprintf("map field %s: %v", f.name, err))
			w.mapVals = vals
			return
		}
		vals = append(vals, v)
	}
	for j, f := range s.fields {
		obj[f.name] = vals[j]
	}
	w.mapVals = vals
	r.dirty = true
}

// applyOps runs a block of assignments. The payload is never changed in
// place: the root and every object on a written path are copied first, so
// a value computed from the incoming record (payload, or a part of it)
// keeps what it held, and a record that fails halfway keeps its payload
// and meta as they were.
func (s *mapStep) applyOps(w *worker, r *Record) {
	vals := w.mapVals[:0]
	defer func() { w.mapVals = vals }()
	for _, op := range s.ops {
		var v any
		switch {
		case op.del:
		case op.prog == nil:
			v = copyJSON(op.value)
		default:
			var err error
			if v, _, err = w.eval.run(op.prog, r); err != nil {
				r.kill(fmt.Sprintf("map %s: %v", op.text, err))
				return
			}
		}
		if op.meta && !op.del {
			str, err := stringify(v)
			if err != nil {
				r.kill(fmt.Sprintf("map %s: %v", op.text, err))
				return
			}
			v = str
		}
		vals = append(vals, v)
	}
	root := r.payload()
	var fresh freshObjects
	for j, op := range s.ops {
		switch {
		case op.meta:
		case len(op.path) == 0:
			root = vals[j]
			fresh = freshObjects{}
		case op.del:
			root = deletePath(root, op.path, &fresh)
		default:
			var why string
			if root, why = setPath(root, op.path, vals[j], &fresh); why != "" {
				r.kill(fmt.Sprintf("map %s: %s", op.text, why))
				return
			}
		}
	}
	for j, op := range s.ops {
		switch {
		case !op.meta:
		case op.del:
			r.flushMeta()
			delete(r.Meta, op.path[0])
		default:
			r.setMeta(op.path[0], vals[j].(string))
		}
	}
	if s.writesPayload {
		r.setValue(root)
		r.dirty = true
	}
}

// freshObjects are the objects one map block made or copied for one
// record: the block may write them in place.
type freshObjects []map[string]any

func (f *freshObjects) own(m map[string]any) map[string]any {
	p := reflect.ValueOf(m).UnsafePointer()
	for _, o := range *f {
		if reflect.ValueOf(o).UnsafePointer() == p {
			return m
		}
	}
	c := maps.Clone(m)
	if c == nil {
		c = map[string]any{}
	}
	*f = append(*f, c)
	return c
}

func (f *freshObjects) make() map[string]any {
	m := map[string]any{}
	*f = append(*f, m)
	return m
}

// setPath returns root with the field at path set to v, creating the
// objects on the way that are missing; why says what is wrong when the
// payload, or a value on the way, exists and is not an object.
func setPath(root any, path []string, v any, fresh *freshObjects) (any, string) {
	obj, ok := root.(map[string]any)
	if !ok {
		return root, fmt.Sprintf("payload is %s, not a JSON object", jsonKind(root))
	}
	out := fresh.own(obj)
	cur := out
	for i, k := range path[:len(path)-1] {
		next, exists := cur[k]
		var m map[string]any
		switch nm, isObj := next.(map[string]any); {
		case !exists:
			m = fresh.make()
		case isObj:
			m = fresh.own(nm)
		default:
			return root, fmt.Sprintf("%s is %s, not an object", plan.PayloadPathText(path[:i+1]), jsonKind(next))
		}
		cur[k] = m
		cur = m
	}
	cur[path[len(path)-1]] = v
	return out, ""
}

// deletePath returns root without the field at path; a field that is not
// there (or under a value that is not an object) leaves root as it is.
func deletePath(root any, path []string, fresh *freshObjects) any {
	cur, ok := root.(map[string]any)
	for _, k := range path[:len(path)-1] {
		if !ok {
			return root
		}
		cur, ok = cur[k].(map[string]any)
	}
	if !ok {
		return root
	}
	if _, there := cur[path[len(path)-1]]; !there {
		return root
	}
	out := fresh.own(root.(map[string]any))
	cur = out
	for _, k := range path[:len(path)-1] {
		m := fresh.own(cur[k].(map[string]any))
		cur[k] = m
		cur = m
	}
	delete(cur, path[len(path)-1])
	return out
}

// copyJSON copies the objects and arrays of a literal value, which every
// record gets its own of.
func copyJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = copyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyJSON(e)
		}
		return out
	}
	return v
}

// literal converts a non-expression plan value to the value a payload holds.
func literal(v plan.Value) (any, error) {
	switch v.Type {
	case plan.TString, plan.TEnum, plan.TDuration:
		return v.Str, nil
	case plan.TInt:
		return v.Int, nil
	case plan.TFloat:
		return v.Float, nil
	case plan.TBool:
		return v.Bool, nil
	case plan.TTemplate:
		s := ""
		for _, p := range v.Template {
			if p.Expr != "" {
				return nil, fmt.Errorf("template with ${%s} is not supported here", p.Expr)
			}
			s += p.Lit
		}
		return s, nil
	case plan.TList:
		out := make([]any, len(v.List))
		for i, e := range v.List {
			x, err := literal(e)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case plan.TBlock:
		out := make(map[string]any, len(v.Block))
		for k, e := range v.Block {
			x, err := literal(e)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported value type %q", v.Type)
}

// dedupStep is `dedup { key, store, ttl }`.
type dedupStep struct {
	key   *program
	store dedupStore
	ttl   time.Duration
	now   func() time.Time
	// turn makes batches reserve their keys in the order they were read,
	// so the first record of a key is the one kept (see turnGate).
	turn *turnGate
	// stopping says the route is draining or has failed (nil: never).
	stopping func() bool
	// waitLimit bounds the wait for keys another instance holds
	// (heldWaitLimit when zero).
	waitLimit time.Duration
}

// heldWaitLimit is how long a record waits at most for a key another
// instance holds and keeps renewing.
const heldWaitLimit = 2 * time.Minute

func (s *dedupStep) heldWaitLimit() time.Duration {
	if s.waitLimit > 0 {
		return s.waitLimit
	}
	return heldWaitLimit
}

func (s *dedupStep) programs() []*program { return []*program{s.key} }

func (s *dedupStep) apply(w *worker, b *batch) error {
	s.turn.wait(b.seq)
	defer s.turn.pass(b.seq)
	keys := w.keys[:0]
	idx := w.idx[:0]
	for i := range b.recs {
		r := &b.recs[i]
		if r.state != stLive {
			continue
		}
		k, present, err := w.eval.runString(s.key, r)
		if err != nil {
			r.kill(fmt.Sprintf("dedup key %s: %v", s.key.src, err))
			continue
		}
		if !present || k == "" {
			reason := fmt.Sprintf("dedup key %s is empty", s.key.src)
			if s.key.isMeta && s.key.metaKey == metaID {
				reason += " (the record has no identity: its id expression was missing or empty)"
			}
			r.kill(reason)
			continue
		}
		keys = append(keys, k)
		idx = append(idx, i)
	}
	if len(keys) == 0 {
		return nil
	}
	verdicts := w.verdicts[:0]
	for range keys {
		verdicts = append(verdicts, dedup.New)
	}
	if err := s.store.Reserve(keys, s.now(), verdicts); err != nil {
		return err
	}
	if err := s.awaitHeldElsewhere(keys, verdicts); err != nil {
		return err
	}
	var reserved []string
	var holders []int
	for j, i := range idx {
		if verdicts[j].Duplicate() {
			b.recs[i].state = stDuplicate
			continue
		}
		reserved = append(reserved, keys[j])
		holders = append(holders, i)
	}
	if len(reserved) > 0 {
		b.reserved = append(b.reserved, reservation{store: s.store, ttl: s.ttl, keys: reserved, recs: holders})
	}
	w.keys, w.idx, w.verdicts = keys, idx, verdicts
	return nil
}

// awaitHeldElsewhere asks again for the keys another process holds in a
// shared store, until each is promoted there (a duplicate) or its
// reservation expires and is taken over here (new). Counting such a
// record as a duplicate at once would lose it when the holder died before
// delivering it (a SIGKILL and a restart within the reservation's
// expiry). A live holder renews its reservation while its batch is in
// flight, however long its sink takes, so this waits as long as it does;
// a dead one stops renewing and its keys come free within the expiry. A
// holder whose clock runs ahead is refused by Reserve. It gives up with an
// error, which stops the route before the record's position is committed,
// once the route stops (a drain or a failure) and the expiry and a margin
// have passed, or after heldWaitLimit whatever happens: two batches can
// each hold a key the other waits for (routes sharing dedup namespaces in
// opposite step orders), and renewing, neither would ever let go; the
// failed route's reservations are released or expire, and the other goes
// on.
func (s *dedupStep) awaitHeldElsewhere(keys []string, verdicts []dedup.Verdict) error {
	var giveUp time.Time
	limit := time.Now().Add(s.heldWaitLimit())
	pause := 50 * time.Millisecond
	for {
		var again []string
		var at []int
		for j, v := range verdicts {
			if v == dedup.HeldElsewhere {
				again = append(again, keys[j])
				at = append(at, j)
			}
		}
		if len(again) == 0 {
			return nil
		}
		if time.Now().After(limit) {
			return fmt.Errorf("dedup store %s: %d key(s) stayed reserved by another instance for %s, e.g. %q: its batch is stuck on its sink, or two routes sharing a dedup namespace each hold a key the other waits for (dedup steps over shared namespaces in opposite orders); stopping this route lets the other go on", s.store.Where(), len(again), s.heldWaitLimit(), again[0])
		}
		if s.stopping != nil && s.stopping() {
			if giveUp.IsZero() {
				giveUp = time.Now().Add(dedup.InFlightExpiry + dedup.MaxClockLead)
			} else if time.Now().After(giveUp) {
				return fmt.Errorf("dedup store %s: the route is stopping and %d key(s) are still reserved by another instance, e.g. %q", s.store.Where(), len(again), again[0])
			}
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
		vs := make([]dedup.Verdict, len(again))
		if err := s.store.Reserve(again, s.now(), vs); err != nil {
			return err
		}
		for i, j := range at {
			verdicts[j] = vs[i]
		}
	}
}

// encodePayload re-encodes a payload a map step changed.
func encodePayload(r *Record) error {
	if !r.dirty {
		return nil
	}
	b, err := marshalPayload(r.value)
	if err != nil {
		return fmt.Errorf("encode payload: %w", err)
	}
	r.Payload, r.dirty = b, false
	return nil
}

// marshalPayload encodes a payload's value as JSON, as json.Marshal does
// but for '<', '>' and '&', which it writes as themselves rather than as
// \u003c, \u003e and \u0026: a record's text goes on as it came, not
// escaped for an HTML page it is not in.
func marshalPayload(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // Encode ends the value with a newline
}

// unnestStep is `unnest payload.items [as item]`: each live record whose
// array holds n elements becomes n records, in place and in order, each
// carrying its parent's source position and an identity derived from the
// parent's and its index (see deriveIDs). The parent's position is acked
// once all n are (Record.kid, AckTracker.AckPart): every record a source
// record became is in its batch until the batch is delivered, so the
// step numbers them all, across unnests.
type unnestStep struct {
	path  []string // the array's fields from the payload's root
	as    string   // "": the element becomes the payload
	text  string   // unnest payload.items, for reasons
	whole *program // `payload`: the step needs the payload decoded whole
}

// unnestNamespace is the UUIDv5 namespace of derived meta["mqb.id"]s.
var unnestNamespace = uuid.MustParse("6d71622d-756e-4e65-8374-2d6964000000")

func newUnnestStep(route string, n *plan.Node, c *compiler) (*unnestStep, error) {
	s := &unnestStep{as: n.Attrs["as"].Str}
	for _, v := range n.Attrs["path"].List {
		if v.Type != plan.TString {
			return nil, fmt.Errorf("route %s: unnest (%s): path holds a %s, not field names", route, n.Pos, v.Type)
		}
		s.path = append(s.path, v.Str)
	}
	if len(s.path) == 0 {
		return nil, fmt.Errorf("route %s: unnest (%s): no path", route, n.Pos)
	}
	s.text = "unnest " + plan.PayloadPathText(s.path)
	whole, err := c.compile("payload")
	if err != nil {
		return nil, err
	}
	s.whole = whole
	return s, nil
}

func (s *unnestStep) programs() []*program { return []*program{s.whole} }

func (s *unnestStep) apply(w *worker, b *batch) error {
	var out []Record
	for i := range b.recs {
		r := &b.recs[i]
		var arr []any
		if r.state == stLive {
			var why string
			if arr, why = arrayAt(r.payload(), s.path); why != "" {
				r.kill(s.text + ": " + why)
			} else if len(arr) == 0 {
				r.state = stFiltered // nothing to deliver: acked, counted as filtered
			}
		}
		if r.state != stLive {
			if out != nil {
				out = append(out, *r)
			}
			continue
		}
		if out == nil {
			out = make([]Record, 0, len(b.recs)+len(arr))
			out = append(out, b.recs[:i]...)
		}
		r.flushMeta() // each element gets a copy of the whole map
		parentMsg := r.msgIDValue()
		parentKey, keyed := r.Meta[metaID]
		if !keyed {
			parentKey = parentMsg.String()
		}
		for j, e := range arr {
			c := *r
			c.Meta = maps.Clone(r.Meta)
			var key string
			c.msgID, key = deriveIDs(parentMsg, parentKey, j)
			c.hasMsgID = true
			c.setMeta(metaID, key)
			if s.as == "" {
				c.value = e
			} else {
				var fresh freshObjects
				root := deletePath(r.value, s.path, &fresh).(map[string]any)
				root[s.as] = e
				c.value = root
			}
			c.dirty = true
			out = append(out, c)
		}
	}
	if out == nil {
		return nil // no record was unnested
	}
	numberParts(out)
	b.recs = out
	return nil
}

// deriveIDs returns the message_id and meta["mqb.id"] of element index of
// a record: UUIDv5s of the parent's message_id and of its identity (its
// meta["mqb.id"], or its message_id), each with the index, so a replay of
// the parent gives the element the same ids.
func deriveIDs(parentMsg uuid.UUID, parentKey string, index int) (uuid.UUID, string) {
	var ix [8]byte
	binary.BigEndian.PutUint64(ix[:], uint64(index))
	msg := uuid.NewSHA1(parentMsg, ix[:])
	key := uuid.NewSHA1(unnestNamespace, append(append([]byte(parentKey), 0), ix[:]...))
	return msg, key.String()
}

// numberParts numbers the records each source record became: a run of
// records with one partition and position is kid 0…n-1 of n.
func numberParts(recs []Record) {
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].Partition == recs[i].Partition && recs[j].Seq == recs[i].Seq && recs[j].gen == recs[i].gen {
			j++
		}
		if n := j - i; n > 1 {
			for k := i; k < j; k++ {
				recs[k].kid, recs[k].kids = uint32(k-i), uint32(n)
			}
		}
		i = j
	}
}

// arrayAt returns the array at path in a decoded payload; why says what
// is there instead.
func arrayAt(v any, path []string) ([]any, string) {
	for i, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			what := "payload"
			if i > 0 {
				what = plan.PayloadPathText(path[:i])
			}
			return nil, fmt.Sprintf("%s is %s, not an object", what, jsonKind(v))
		}
		if v, ok = obj[k]; !ok {
			return nil, fmt.Sprintf("%s is missing", plan.PayloadPathText(path[:i+1]))
		}
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Sprintf("%s is %s, not an array", plan.PayloadPathText(path), jsonKind(v))
	}
	return arr, ""
}
