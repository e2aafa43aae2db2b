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

// role is where an endpoint stands in a route.
type role int

const (
	roleSource role = iota
	roleSink
	roleHandler
)

// routeCtx is the state of one route while it is checked: what the source
// is (for stability), whether an `id` step has run yet, and the nodes built
// so far in execution order.
type routeCtx struct {
	c    *compiler
	file *lang.File
	name string

	src     *stdlib.Kind // nil until the source is known
	srcMode string
	idSet   bool
	idStab  stability
	idText  string
	// msgIDAfter, when set, is the stability of message_id after an
	// unnest derived it from the parent's (unnest.go).
	msgIDAfter *stability
	taint      payloadTaint // payload fields rewritten by map
	// metaWrites are the meta keys map set or deleted, with the stability
	// of their values; a handler may set meta keys of its own, so it
	// forgets them.
	metaWrites map[string]stability
	// replaced, when set, says why the payload is not the record read
	// (the forward of a request whose call answers with a new body): every
	// payload value is then per-delivery.
	replaced string

	// inNamedUnused is set while checking an endpoint no route uses: there
	// is no route context, so route-dependent errors are not reported.
	inNamedUnused bool
	curRange      diag.Range

	concurrency    int64
	batchSize      int64
	guarantee      string
	guaranteeRange diag.Range
	// deadLetter is set while checking or proving a dlq's target (and
	// the branches under it): a dead-letter target is written by time
	// (E062), so auto names it by write_time and its proof says why.
	// dlqNotes collect, while the target is proven, each naming the dlq
	// overrode, for the dlq's verdict line.
	deadLetter bool
	dlqNotes   []string
	// outbox is set while proving a route the transactional outbox covers
	// (outboxApplies): a plain INSERT is then not replayed.
	outbox bool
	// readsSrcMeta is set when an expression reads an mqb.src.* key the
	// source sets: emit turns the source's source_metadata on.
	readsSrcMeta bool
	// srcGlob is the path of a file source that names many files (a glob
	// or a directory), whose record numbering spans them: "" otherwise.
	srcGlob string
	// unnested is the path text of an unnest the route has passed: its
	// elements share their record's source position and are told apart
	// by their index among the record's elements (unnest.go).
	unnested string
	// unnestDrop says why which elements are live may change on a replay
	// since the route's first unnest (a per-delivery filter, map or
	// parse), "" while it cannot; unnumbered says why a replay may number
	// a record's elements differently (a per-delivery array, or such a
	// step before a later unnest, which numbers what is live), "" while
	// the numbering repeats: positional parts behind an unnest need it to
	// (E061).
	unnestDrop, unnumbered string

	expanding []string // named endpoints being expanded, to stop ref cycles

	nodes  []*nodeInfo // execution order
	dedups []*nodeInfo
	// elided is the dedup the sink makes redundant, left out of the plan
	// (elidableDedup); elidedBy is that sink.
	elided, elidedBy *nodeInfo
	warnings         []string
	// idEnvWarned: the id step got W021, so a write key that reads
	// meta["mqb.id"] needs no second one.
	idEnvWarned bool
	// processReads names what the route's keys and decisions (id, dedup
	// and write keys, filters, switches) read from the process rather
	// than the record (env("X"), the local time zone, the time zone
	// database): they repeat on a replay only while it does not change,
	// which processPremise makes a checked premise.
	processReads map[string]bool
	nextID       int
	ids          map[*nodeInfo]string // plan node IDs, filled by emit
}

// nodeInfo is a node being built plus the facts the proof needs about it.
type nodeInfo struct {
	role     string
	side     string
	name     string // kind or step name
	kind     *stdlib.Kind
	step     *stdlib.Step
	ref      string
	attrs    map[string]*attrInfo
	exprText string
	exprStab stability
	assign   []plan.Assignment // a map block beyond top-level fields
	children []branchInfo
	rng      diag.Range
	// broken is set when checking the node reported an error: the proof
	// then says so instead of guessing from a partial node.
	broken bool
}

type branchInfo struct {
	label, match string
	node         *nodeInfo
}

// where names the route (or unused named endpoint) a diagnostic is about.
func (rc *routeCtx) where() string {
	if rc.inNamedUnused {
		return " in " + rc.name
	}
	return " in route " + rc.name
}

// warn records a warning as a diagnostic and on the route's plan.
func (rc *routeCtx) warn(code string, r diag.Range, summary, detail string) {
	rc.c.add(code, r, summary, detail)
	rc.warnings = append(rc.warnings, fmt.Sprintf("%s: %s", code, summary))
}

func (c *compiler) compileRoute(f *lang.File, r *lang.Route) *plan.Route {
	if r.Name == nil || r.Body == nil {
		return nil
	}
	name := r.Name.Name
	if prev, dup := c.routeNames[name]; dup {
		c.add("E010", r.Name.Range(), fmt.Sprintf("route %q is declared twice", name),
			fmt.Sprintf("The first declaration is at %s; route names key checkpoints and dedup state, so they must be unique.", prev.Start))
	} else {
		c.routeNames[name] = r.Name.Range()
	}
	rc := &routeCtx{c: c, file: f, name: name, concurrency: 1, batchSize: 1024, taint: newTaint()}
	errorsBefore := len(c.diags.Errors())
	items := r.Body.Items()

	fromIdx := -1
	for i, it := range items {
		if it.Key.Name != "from" || c.misplaced[it] {
			continue
		}
		if fromIdx >= 0 {
			c.add("E019", it.Key.Range(), fmt.Sprintf("route %s has a second from", name), "A route reads from exactly one source; write a second route for another source.")
			continue
		}
		fromIdx = i
	}
	var source *nodeInfo
	if fromIdx < 0 {
		c.add("E019", r.Name.Range(), fmt.Sprintf("route %s has no from", name), "Add `from <kind> { … }` after the route settings.")
	} else {
		rc.curRange = items[fromIdx].Range()
		source = rc.checkEndpointItem(items[fromIdx], roleSource)
		if source != nil {
			rc.src = source.kind
			if m, ok := source.attrs["mode"]; ok {
				rc.srcMode = m.val.Str
			}
			if a := source.kind.NoPositionWith; a != "" && boolAttr(source, a) {
				rc.srcMode = a // postgres_cdc "in snapshot mode": no position to name parts by
			}
			if source.kind.Name == "postgres_cdc" {
				rc.checkCDCSnapshot(source)
			}
			rc.checkFileGlob(source)
			rc.nodes = append(rc.nodes, source)
		}
	}

	const (
		phaseSettings = iota
		phaseInput
		phaseOutput
	)
	phase := phaseSettings
	var sink, handler *nodeInfo
	sawTo, sawHandle := false, false
	var outputOnlyBeforeHandle []*lang.Item
	var outputReason string
	for i, it := range items {
		if c.misplaced[it] {
			continue // E028
		}
		key := it.Key.Name
		rc.curRange = it.Range()
		switch {
		case i == fromIdx:
			phase = max(phase, phaseInput)
		case key == "from":
			// reported above
		case key == "guarantee" || isSetting(key):
			if phase > phaseSettings || sawTo {
				c.add("E019", it.Key.Range(), fmt.Sprintf("route setting %s of route %s must come before from", key, name), "Settings open the route body: guarantee, concurrency, batch_size.")
			}
			rc.checkSetting(it)
		case key == "handle":
			switch {
			case fromIdx < 0 || i < fromIdx:
				c.add("E019", it.Key.Range(), fmt.Sprintf("handle in route %s comes before from", name), "The order is: settings, from, input steps, handle, output steps, to.")
			case sawTo:
				c.add("E019", it.Key.Range(), fmt.Sprintf("handle in route %s comes after to", name), "The order is: settings, from, input steps, handle, output steps, to.")
			case sawHandle:
				c.add("E019", it.Key.Range(), fmt.Sprintf("route %s has a second handle", name), "A route has at most one handler.")
			}
			for _, o := range outputOnlyBeforeHandle {
				c.add("E031", o.Key.Range(), fmt.Sprintf("%s is output-only but stands before handle in route %s", o.Key.Name, name),
					"The output side runs handle, then output steps, then the sink: move it below handle.")
			}
			outputOnlyBeforeHandle = nil
			sawHandle = true
			phase = phaseOutput
			if outputReason == "" {
				outputReason = fmt.Sprintf("after handle at line %d", it.Pos.Line)
			}
			if n := rc.checkEndpointItem(it, roleHandler); n != nil && handler == nil {
				handler = n
				rc.nodes = append(rc.nodes, n)
			}
			rc.metaWrites = nil
		case key == "to":
			if sawTo {
				c.add("E019", it.Key.Range(), fmt.Sprintf("route %s has a second to", name), "A route writes to exactly one sink; use `to fanout { to … to … }` for several.")
				continue
			}
			sawTo = true
			if fromIdx >= 0 && i < fromIdx {
				c.add("E019", it.Key.Range(), fmt.Sprintf("to in route %s comes before from", name), "The order is: settings, from, steps, to.")
			}
			sink = rc.checkEndpointItem(it, roleSink)
			if sink != nil {
				rc.nodes = append(rc.nodes, sink)
			}
		default:
			st, ok := stdlib.LookupStep(key)
			if !ok {
				if it.Assign != nil {
					names := append(settingNames(), "guarantee")
					c.add("E013", it.Key.Range(), fmt.Sprintf("route %s has no setting %q", name, key), joinDetail(didYouMean(key, names), "Route settings are guarantee, concurrency and batch_size."))
				} else {
					names := append(slices.Clone(stepNames), "from", "to", "handle")
					c.add("E014", it.Key.Range(), fmt.Sprintf("unknown step %q in route %s", key, name), joinDetail(didYouMean(key, names), "Steps are "+joinNames(stepNames)+"."))
				}
				continue
			}
			switch {
			case fromIdx < 0 || i < fromIdx:
				c.add("E019", it.Key.Range(), fmt.Sprintf("step %s in route %s comes before from", key, name), "Steps follow the source, in data-flow order.")
			case sawTo:
				c.add("E019", it.Key.Range(), fmt.Sprintf("step %s in route %s comes after to", key, name), "The sink ends the route; put output steps such as retry and dlq above it.")
			}
			side := plan.SideInput
			if phase == phaseOutput || st.Side == stdlib.OutputOnly {
				side = plan.SideOutput
			}
			if st.Side == stdlib.InputOnly && side == plan.SideOutput {
				c.add("E030", it.Key.Range(), fmt.Sprintf("%s is input-only but stands on the output side of route %s (%s)", key, name, outputReason),
					fmt.Sprintf("%s acts on records as they arrive; on the output side it would run once per sink attempt. Move it above handle and any retry/dlq.", key))
			}
			if st.Side == stdlib.OutputOnly && !sawHandle {
				outputOnlyBeforeHandle = append(outputOnlyBeforeHandle, it)
			}
			if n := rc.checkStep(it, st, side); n != nil {
				rc.nodes = append(rc.nodes, n)
			}
			if st.Side == stdlib.OutputOnly {
				phase = phaseOutput
				if outputReason == "" {
					outputReason = fmt.Sprintf("after %s at line %d", key, it.Pos.Line)
				}
			}
		}
	}
	if !sawTo {
		c.add("E019", r.Name.Range(), fmt.Sprintf("route %s has no to", name), "End the route with `to <kind> { … }`.")
	}
	proof := rc.prove(source, handler, sink)
	// A route that already has errors is not proven either; E045 on top of
	// them would only repeat the first mistake.
	if len(c.diags.Errors()) == errorsBefore {
		switch {
		case rc.guarantee == "effectively_once" && !proof.effectivelyOnce():
			c.add("E045", rc.guaranteeRange, fmt.Sprintf("route %s declares guarantee effectively_once but it is not proven: %s", name, proof.missing),
				fmt.Sprintf("The route is %s as written; fix the missing piece or drop the guarantee line.", proof.verdict))
		case rc.guarantee == "at_least_once" && proof.verdict == plan.AtMostOnce:
			c.add("E045", rc.guaranteeRange, fmt.Sprintf("route %s declares guarantee at_least_once but it is at-most-once: %s", name, proof.missing),
				"A crash loses records on this route; use a source that replays (JetStream, a file in consume or group_subscribe mode) or drop the guarantee line.")
		}
	}
	return rc.emit(r, proof)
}

func isSetting(key string) bool {
	for _, s := range stdlib.Settings {
		if s.Name == key {
			return true
		}
	}
	return false
}

func settingNames() []string {
	var out []string
	for _, s := range stdlib.Settings {
		out = append(out, s.Name)
	}
	return out
}

func (rc *routeCtx) checkSetting(it *lang.Item) {
	key := it.Key.Name
	if key == "guarantee" {
		rc.guaranteeRange = it.Range()
		var word string
		if it.Arg != nil {
			if tok, ok := it.Arg.Single(); ok && tok.Type == lang.TIdent {
				word = tok.Value
			}
		}
		if !slices.Contains(stdlib.Guarantees, word) {
			rng := it.Key.Range()
			if it.Arg != nil {
				rng = it.Arg.Range()
			}
			rc.c.add("E017", rng, fmt.Sprintf("guarantee of route %s must be effectively_once or at_least_once", rc.name), didYouMean(word, stdlib.Guarantees))
			return
		}
		rc.guarantee = word
		return
	}
	var decl *stdlib.Attr
	for i := range stdlib.Settings {
		if stdlib.Settings[i].Name == key {
			decl = &stdlib.Settings[i]
		}
	}
	if it.Assign == nil {
		rc.c.add("E015", it.Key.Range(), fmt.Sprintf("route setting %s needs a value: %s = …", key, key), "")
		return
	}
	ai, ok := rc.convertValue(decl, it.Assign, "route")
	if !ok {
		return
	}
	if ai.val.Int < 1 {
		rc.c.add("E015", it.Assign.Range(), fmt.Sprintf("route setting %s must be at least 1", key), "")
		return
	}
	switch key {
	case "concurrency":
		rc.concurrency = ai.val.Int
	case "batch_size":
		rc.batchSize = ai.val.Int
	}
}

// checkEndpointItem checks `from|to|handle|call|forward <kind> { … }` or
// `… ref NAME`.
func (rc *routeCtx) checkEndpointItem(it *lang.Item, r role) *nodeInfo {
	switch {
	case it.Ref != nil:
		ne, ok := rc.c.endpoints[it.Ref.Name]
		if !ok {
			var names []string
			for n := range rc.c.endpoints {
				names = append(names, n)
			}
			slices.Sort(names)
			rc.c.add("E011", it.Ref.Range(), fmt.Sprintf("unknown ref %q in route %s", it.Ref.Name, rc.name),
				joinDetail(didYouMean(it.Ref.Name, names), "Declare it with `output "+it.Ref.Name+" = <kind> { … }`."))
			return nil
		}
		ne.used = true
		if slices.Contains(rc.expanding, it.Ref.Name) {
			rc.c.add("E024", it.Ref.Range(), fmt.Sprintf("ref %s in route %s reaches itself: %s", it.Ref.Name, rc.name, strings.Join(append(rc.expanding, it.Ref.Name), " → ")),
				"A named endpoint cannot contain itself; point the branch at another endpoint.")
			return nil
		}
		if (r == roleSource) != (ne.decl.Dir == "input") {
			want := "output"
			if r == roleSource {
				want = "input"
			}
			rc.c.add("E022", it.Ref.Range(), fmt.Sprintf("%s %s refers to %s endpoint %q; it must be an %s endpoint", it.Key.Name, it.Ref.Name, ne.decl.Dir, it.Ref.Name, want), "")
			return nil
		}
		if ne.decl.Kind == nil {
			return nil
		}
		rc.expanding = append(rc.expanding, it.Ref.Name)
		n := rc.checkKindBody(ne.decl.Kind, ne.decl.Body, r, it.Key.Name, it.Range())
		rc.expanding = rc.expanding[:len(rc.expanding)-1]
		if n != nil {
			n.ref = it.Ref.Name
		}
		return n
	case it.Kind != nil:
		return rc.checkKindBody(it.Kind, it.Body, r, it.Key.Name, it.Range())
	default:
		rc.c.add("E019", it.Key.Range(), fmt.Sprintf("%s in route %s needs a kind: %s <kind> { … } or %s ref NAME", it.Key.Name, rc.name, it.Key.Name, it.Key.Name),
			"Kinds are "+joinNames(kindNames)+".")
		return nil
	}
}

// checkKindBody checks one endpoint of the given kind.
func (rc *routeCtx) checkKindBody(kindID *lang.Ident, body *lang.Block, r role, keyword string, rng diag.Range) *nodeInfo {
	k, ok := stdlib.LookupKind(kindID.Name)
	if !ok {
		rc.c.add("E012", kindID.Range(), fmt.Sprintf("unknown endpoint kind %q after %s%s", kindID.Name, keyword, rc.where()),
			joinDetail(didYouMean(kindID.Name, kindNames), "Kinds are "+joinNames(kindNames)+"."))
		return nil
	}
	if r == roleSource && !k.Source {
		rc.c.add("E022", kindID.Range(), fmt.Sprintf("%s cannot be a source (from %s)", k.Name, k.Name), "Sources are "+joinNames(sourceKinds())+".")
		return nil
	}
	if r != roleSource && !k.Sink {
		rc.c.add("E022", kindID.Range(), fmt.Sprintf("%s cannot be written to (%s %s)", k.Name, keyword, k.Name), "It is a source-only kind.")
		return nil
	}
	end := stdlib.EndSink
	if r == roleSource {
		end = stdlib.EndSource
	}
	if why := k.Unimplemented[end]; why != "" {
		rc.c.add("E027", kindID.Range(), fmt.Sprintf("this runtime cannot run %s as a %s yet (%s %s%s)", k.Name, end, keyword, k.Name, rc.where()), why)
		return nil
	}
	if r == roleSource && k.Structural {
		return nil
	}
	n := &nodeInfo{kind: k, name: k.Name, rng: rng, side: plan.SideOutput}
	switch r {
	case roleSource:
		n.role, n.side = plan.RoleSource, plan.SideInput
	case roleHandler:
		n.role = plan.RoleHandler
	default:
		n.role = plan.RoleSink
	}
	owner := k.Name
	var nested func(it *lang.Item) bool
	if k.Structural {
		nested = rc.structuralChildren(n, k, body)
	}
	errs := rc.c.errorCount()
	n.attrs = rc.checkAttrs(k.Attrs, body, owner, kindID.Range(), nested)
	rc.checkEnds(n, r == roleSource)
	rc.checkStdio(n)
	rc.checkRunnable(n)
	n.broken = rc.c.errorCount() > errs
	if rc.deadLetter {
		// Not a broken node: its proof, at-least-once, says why too.
		rc.checkDeadLetterNaming(n)
	}
	if k.Structural {
		rc.checkStructure(n, kindID.Range())
	}
	return n
}

func sourceKinds() []string {
	var out []string
	for _, k := range stdlib.Kinds {
		if k.Source {
			out = append(out, k.Name)
		}
	}
	return out
}

// structuralChildren returns the handler of nested items of switch,
// request and fanout.
func (rc *routeCtx) structuralChildren(n *nodeInfo, k *stdlib.Kind, body *lang.Block) func(*lang.Item) bool {
	return func(it *lang.Item) bool {
		key := it.Key.Name
		switch {
		case k.Name == "switch" && key == "case" && it.Label != nil:
			match := lang.StringValue(lexTok(it.Label))
			for _, b := range n.children {
				if b.label == plan.BranchCase && b.match == match {
					rc.c.add("E018", it.Label.Range(), fmt.Sprintf("switch has two cases %q", match), "Only the first would ever match.")
				}
			}
			if child := rc.branchTarget(it, "case"); child != nil {
				n.children = append(n.children, branchInfo{label: plan.BranchCase, match: match, node: child})
			}
			return true
		case k.Name == "switch" && key == "default" && it.Kind == nil && it.Ref == nil:
			for _, b := range n.children {
				if b.label == plan.BranchDefault {
					rc.c.add("E018", it.Key.Range(), "switch has two default branches", "")
				}
			}
			if child := rc.branchTarget(it, "default"); child != nil {
				n.children = append(n.children, branchInfo{label: plan.BranchDefault, node: child})
			}
			return true
		case k.Name == "request" && (key == "call" || key == "forward"):
			label := plan.BranchCall
			if key == "forward" {
				label = plan.BranchForward
			}
			for _, b := range n.children {
				if b.label == label {
					rc.c.add("E018", it.Key.Range(), fmt.Sprintf("request has two %s endpoints", key), "")
				}
			}
			if key == "forward" {
				if kind := rc.callKind(body); kind == "http" {
					// The forward sees the call's response as its payload.
					prev := rc.replaced
					rc.replaced = "payload is the response of the request's http call, which can differ on every call"
					defer func() { rc.replaced = prev }()
				}
				// The call may set meta keys of its own.
				prevMeta := rc.metaWrites
				rc.metaWrites = nil
				defer func() { rc.metaWrites = prevMeta }()
			}
			if child := rc.checkEndpointItem(it, roleSink); child != nil {
				n.children = append(n.children, branchInfo{label: label, node: child})
			}
			return true
		case k.Name == "fanout" && key == "to":
			if child := rc.checkEndpointItem(it, roleSink); child != nil {
				n.children = append(n.children, branchInfo{label: plan.BranchTo, node: child})
			}
			return true
		}
		return false
	}
}

// callKind is the kind of the `call` endpoint in a request's body (through
// a ref to a named endpoint), or "".
func (rc *routeCtx) callKind(body *lang.Block) string {
	for it := range body.EachItem() {
		if it.Key.Name != "call" {
			continue
		}
		switch {
		case it.Kind != nil:
			return it.Kind.Name
		case it.Ref != nil:
			if ne, ok := rc.c.endpoints[it.Ref.Name]; ok && ne.decl.Kind != nil {
				return ne.decl.Kind.Name
			}
		}
	}
	return ""
}

// branchTarget checks `case "x" { to … }` or `default { to … }` and
// `dlq { to … }`: a block holding exactly one `to`.
func (rc *routeCtx) branchTarget(it *lang.Item, what string) *nodeInfo {
	if it.Body == nil {
		rc.c.add("E019", it.Key.Range(), fmt.Sprintf("%s needs a block holding one `to <kind> { … }`", what), "")
		return nil
	}
	var target *nodeInfo
	count := 0
	for in := range it.Body.EachItem() {
		if rc.c.misplaced[in] {
			continue // E028
		}
		if in.Key.Name != "to" {
			rc.c.add("E019", in.Key.Range(), fmt.Sprintf("%s holds %q; it takes one `to <kind> { … }`", what, in.Key.Name), didYouMean(in.Key.Name, []string{"to"}))
			continue
		}
		count++
		if count > 1 {
			rc.c.add("E019", in.Key.Range(), fmt.Sprintf("%s has a second to", what), "Use `to fanout { to … to … }` to write to several endpoints.")
			continue
		}
		target = rc.checkEndpointItem(in, roleSink)
	}
	if count == 0 {
		rc.c.add("E019", it.Key.Range(), fmt.Sprintf("%s needs a `to <kind> { … }`", what), "")
	}
	return target
}

// checkStructure checks the shape of a structural node once its children
// are known.
func (rc *routeCtx) checkStructure(n *nodeInfo, rng diag.Range) {
	switch n.name {
	case "switch":
		hasDefault := false
		for _, b := range n.children {
			hasDefault = hasDefault || b.label == plan.BranchDefault
		}
		if !hasDefault && !rc.inNamedUnused {
			rc.warn("W003", rng, fmt.Sprintf("switch in route %s has no default branch", rc.name),
				"Records matching no case are dropped (and counted); a failed request forwards the original record, which may match nothing.")
		}
	case "request":
		var call, fwd bool
		for _, b := range n.children {
			call = call || b.label == plan.BranchCall
			fwd = fwd || b.label == plan.BranchForward
		}
		if !call {
			rc.c.add("E016", rng, "request needs a call endpoint: call <kind> { … }", "")
		}
		if !fwd {
			rc.c.add("E016", rng, "request needs a forward endpoint: forward <kind> { … }", "")
		}
	case "fanout":
		if len(n.children) == 0 {
			rc.c.add("E016", rng, "fanout needs at least one `to <kind> { … }`", "")
		}
	}
}
