package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/internal/pebbledb"
	"github.com/mqb-dev/mqb/stdlib"
)

// compiler compiles a route's expressions once, against stdlib's env.
type compiler struct {
	lookup stdlib.EnvLookup
}

func (c *compiler) compile(src string) (*program, error) {
	return compileProgram(src, c.lookup)
}

// renderStatic renders a template attribute that may use env() but no
// record data (a connection URL).
func (c *compiler) renderStatic(a nodeAttrs, name string) (string, error) {
	parts, ok := a.template(name)
	if !ok {
		return "", a.errorf(name, "required")
	}
	var b strings.Builder
	var ev evaluator
	for _, p := range parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
			continue
		}
		prog, err := c.compile(p.Expr)
		if err != nil {
			return "", a.errorf(name, "${%s}: %v", p.Expr, err)
		}
		v, _, err := ev.run(prog, &Record{})
		if err != nil {
			return "", a.errorf(name, "${%s}: %v", p.Expr, err)
		}
		s, err := stringify(v)
		if err != nil {
			return "", a.errorf(name, "${%s}: %v", p.Expr, err)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// storeDir resolves a pebble:// store attribute. A store left at its
// stdlib default lives under Options.StateDir when one is given.
func (o *Options) storeDir(a nodeAttrs, attr, declaredDefault, stateSub string) (string, error) {
	url := a.str(attr, declaredDefault)
	if url == declaredDefault && o.StateDir != "" {
		return filepath.Join(o.StateDir, stateSub), nil
	}
	dir, err := pebbledb.DirFromURL(url, o.BaseDir)
	if err != nil {
		return "", a.errorf(attr, "%v", err)
	}
	return dir, nil
}

func declaredDefault(kind, attr string, isStep bool) string {
	var at *stdlib.Attr
	if isStep {
		if s, ok := stdlib.LookupStep(kind); ok {
			at = s.Attr(attr)
		}
	} else if k, ok := stdlib.LookupKind(kind); ok {
		at = k.Attr(attr)
	}
	if at != nil {
		if s, ok := at.Default.(string); ok {
			return s
		}
	}
	return ""
}

// buildRoute turns a plan route into a runnable pipeline. Everything that
// can be wrong with the plan is reported here, before a record moves.
func buildRoute(ctx context.Context, pr *plan.Route, o *Options) (rt *route, err error) {
	rt = &route{
		name:        pr.Name,
		plan:        planFile(pr),
		log:         o.Logger.With("route", pr.Name),
		batchSize:   pr.BatchSize,
		concurrency: pr.Concurrency,
		retry:       retryPolicy{attempts: 1},
		commitEvery: o.CommitInterval,
		now:         time.Now,
		env:         o.Env,
	}
	for _, e := range pr.Elided {
		if e.Kind == "dedup" {
			rt.absorbedBy = e.By
		}
	}
	if rt.batchSize <= 0 {
		rt.batchSize = 1024
	}
	if rt.concurrency <= 0 {
		rt.concurrency = 1
	}
	defer func() {
		if err != nil {
			rt.close()
		}
	}()
	c := &compiler{lookup: o.Env}
	var sinkNode, handlerNode *plan.Node
	hasHandler := false
	for i := range pr.Nodes {
		hasHandler = hasHandler || pr.Nodes[i].Role == plan.RoleHandler
	}
	for i := range pr.Nodes {
		n := &pr.Nodes[i]
		a := nodeAttrs{route: pr.Name, node: n}
		switch n.Role {
		case plan.RoleSource:
			if rt.src != nil {
				return rt, fmt.Errorf("route %s: more than one source", pr.Name)
			}
			if err := rt.buildSource(pr, a, c, o); err != nil {
				return rt, err
			}
		case plan.RoleStep:
			before := len(rt.steps)
			if err := rt.buildStep(a, c, o); err != nil {
				return rt, err
			}
			if len(rt.steps) > before && !(hasHandler && n.Side == plan.SideOutput) {
				rt.stepNames = append(rt.stepNames, tapPointName(rt.stepNames, n.Kind))
			}
			// A step the plan puts on the output side of a handler runs
			// after it, over what the handler passed: the order is input
			// steps, handler, output steps, sink. Without a handler the
			// output steps simply follow the input ones.
			if hasHandler && n.Side == plan.SideOutput && len(rt.steps) > before {
				rs, ok := rt.steps[before].(recordStep)
				if !ok {
					return rt, fmt.Errorf("route %s: %s (%s) cannot run on the output side", pr.Name, n.Kind, n.Pos)
				}
				rt.steps = rt.steps[:before]
				rt.outSteps = append(rt.outSteps, rs)
			}
		case plan.RoleHandler:
			if handlerNode != nil {
				return rt, fmt.Errorf("route %s: more than one handler", pr.Name)
			}
			handlerNode = n
		case plan.RoleSink:
			if sinkNode != nil {
				return rt, fmt.Errorf("route %s: more than one sink", pr.Name)
			}
			sinkNode = n
		default:
			return rt, fmt.Errorf("route %s: node %s has unknown role %q", pr.Name, n.ID, n.Role)
		}
	}
	if rt.src == nil {
		return rt, fmt.Errorf("route %s: no source", pr.Name)
	}
	if sinkNode == nil {
		return rt, fmt.Errorf("route %s: no sink", pr.Name)
	}
	if rt.sink, rt.sinkProgs, err = rt.buildSink(ctx, nodeAttrs{route: pr.Name, node: sinkNode}, c, o, false); err != nil {
		return rt, err
	}
	routeSink := rt.sink
	if handlerNode != nil {
		h, progs, err := rt.buildHandler(ctx, handlerNode, rt.sink, c, o, pr.Guarantee)
		if err != nil {
			return rt, err
		}
		h.after = rt.outSteps
		rt.sink, rt.sinkProgs = h, append(progs, rt.sinkProgs...)
	}
	if err := verifyGuarantees(rt.sink, pr.Guarantee); err != nil { // premise.go
		return rt, err
	}
	if ob, ok := rt.sink.(OutboxSink); ok {
		if err := ob.WireOutbox(ctx, rt.src, OutboxRoute{Name: rt.name, Log: rt.log, InOrder: rt.concurrency == 1}); err != nil {
			return rt, err
		}
	}
	if err := rt.checkPremises(ctx, pr); err != nil { // premise.go
		return rt, err
	}
	var progs []*program
	for _, s := range rt.steps {
		progs = append(progs, s.programs()...)
	}
	for _, s := range rt.outSteps {
		progs = append(progs, s.programs()...)
	}
	progs = append(append(progs, rt.sinkProgs...), rt.dlqProgs...)
	if m, ok := routeSink.(RouteSinkMarker); ok {
		m.MarkRouteSink()
	}
	rt.needPayload, rt.payloadFields = payloadNeeds(progs)
	if rt.payloadFields != nil && rt.srcFormat == "json" {
		rt.slots = newPayloadSlots(rt.payloadFields, progs)
	}
	rt.linesPassThrough(handlerNode != nil)
	rt.syncOnCommit()
	return rt, nil
}

// payloadNeeds says whether any program reads the payload and, when every
// one that does is a plain field path, which top-level fields it reads: a
// payload is then decoded only that far (the rest is validated, not built).
func payloadNeeds(progs []*program) (need bool, fields map[string]bool) {
	fields = map[string]bool{}
	for _, p := range progs {
		if !p.usesPayload {
			continue
		}
		need = true
		if p.payloadPath == nil {
			return true, nil
		}
		fields[p.payloadPath[0]] = true
	}
	if !need {
		return false, nil
	}
	return true, fields
}

func (rt *route) buildSource(pr *plan.Route, a nodeAttrs, c *compiler, o *Options) error {
	if err := rt.buildSourceEndpoint(a, c, o); err != nil {
		return err
	}
	_, positional := rt.src.Position(nil)
	if !positional && !hasPremise(pr, plan.PremiseProcessUnchanged) {
		return nil // the broker keeps the position: no checkpoint store
	}
	cp, err := openCheckpointStore(a, o)
	if err != nil {
		return err
	}
	if positional {
		rt.cp = cp
	}
	// The fingerprint of what the route reads from the process is kept
	// beside its checkpoint (premise_process.go), in the store the
	// source's checkpoint_store names even when its broker keeps the
	// position.
	rt.processStore = cp
	return nil
}

// hasPremise reports whether the route's proof rests on a premise of kind.
func hasPremise(pr *plan.Route, kind string) bool {
	for _, p := range pr.Premises {
		if p.Kind == kind {
			return true
		}
	}
	return false
}

// buildSourceEndpoint sets rt.src (built, not opened) without its
// checkpoint store.
func (rt *route) buildSourceEndpoint(a nodeAttrs, c *compiler, o *Options) error {
	src, err := rt.buildSourceOf(&buildEnv{ctx: context.Background(), rt: rt, a: a, c: c, o: o})
	if err != nil {
		return err
	}
	rt.src = src
	rt.srcFormat = rt.src.RecordFormat()
	if ws, ok := src.(WindowedSource); ok {
		if w := int64(ws.AckWindow()); w > 0 {
			rt.ackWindow = max(1, w/2)
			rt.commitNow = make(chan struct{}, 1)
		}
	}
	return nil
}

func (rt *route) buildStep(a nodeAttrs, c *compiler, o *Options) error {
	n := a.node
	switch n.Kind {
	case "id":
		p, err := c.compile(n.Expr)
		if err != nil {
			return fmt.Errorf("route %s: id (%s): %w", rt.name, n.Pos, err)
		}
		rt.steps = append(rt.steps, &idStep{prog: p})
	case "filter":
		p, err := c.compile(n.Expr)
		if err != nil {
			return fmt.Errorf("route %s: filter (%s): %w", rt.name, n.Pos, err)
		}
		rt.steps = append(rt.steps, &filterStep{prog: p})
	case "map":
		s, err := newMapStep(rt.name, n, c)
		if err != nil {
			return err
		}
		rt.steps = append(rt.steps, s)
	case "unnest":
		s, err := newUnnestStep(rt.name, n, c)
		if err != nil {
			return err
		}
		rt.steps = append(rt.steps, s)
	case "parse":
		s, err := newParseStep(a, c)
		if err != nil {
			return err
		}
		rt.steps = append(rt.steps, s)
	case "dedup":
		var cfg struct {
			Key       string        `attr:"key"`
			Store     string        `attr:"store"` // openDedupStore
			TTL       time.Duration `attr:"ttl"`
			Namespace string        `attr:"namespace"`
			Keep      bool          `attr:"keep"` // read by the compiler: a dedup in the plan runs
		}
		if err := decodeConfig(a, &cfg); err != nil {
			return err
		}
		key, err := c.compile(cfg.Key)
		if err != nil {
			return a.errorf("key", "%v", err)
		}
		ns := dedupNamespace(rt.name, len(rt.dedupStores)+1, cfg.Namespace)
		st, err := openDedupStore(a, o, ns)
		if err != nil {
			return err
		}
		rt.dedupStores = append(rt.dedupStores, st)
		if err := rt.claimDedup(st, cfg.Namespace != ""); err != nil {
			return err
		}
		turn := newTurnGate()
		rt.turns = append(rt.turns, turn)
		rt.steps = append(rt.steps, &dedupStep{key: key, store: st, ttl: cfg.TTL, now: rt.now, turn: turn, stopping: rt.stopping})
	case "retry":
		var cfg struct {
			Attempts   int64         `attr:"attempts"`
			Backoff    time.Duration `attr:"backoff"`
			MaxBackoff time.Duration `attr:"max_backoff"`
		}
		if err := decodeConfig(a, &cfg); err != nil {
			return err
		}
		if cfg.Attempts < 1 {
			return a.errorf("attempts", "must be at least 1, got %d", cfg.Attempts)
		}
		rt.retry = retryPolicy{attempts: int(cfg.Attempts), backoff: cfg.Backoff, maxBackoff: cfg.MaxBackoff}
	case "dlq":
		var target *plan.Node
		for i := range n.Children {
			if n.Children[i].Label == plan.BranchTo {
				target = &n.Children[i].Node
				break
			}
		}
		if target == nil {
			return fmt.Errorf("route %s: dlq (%s): no `to` endpoint", rt.name, n.Pos)
		}
		if rt.dlq != nil {
			return fmt.Errorf("route %s: dlq (%s): a route has one dead-letter queue", rt.name, n.Pos)
		}
		s, progs, err := rt.buildSink(context.Background(), nodeAttrs{route: rt.name, node: target}, c, o, true)
		if err != nil {
			return err
		}
		rt.dlq, rt.dlqProgs = s, progs
	default:
		return fmt.Errorf("route %s: step %s (%s) is not supported by this runtime yet", rt.name, n.Kind, n.Pos)
	}
	return nil
}

// buildSink builds the endpoint of a `to` (the route's sink, or the DLQ's
// target when dlq is true).
func (rt *route) buildSink(ctx context.Context, a nodeAttrs, c *compiler, o *Options, dlq bool) (sink, []*program, error) {
	return rt.buildSinkOf(&buildEnv{ctx: ctx, rt: rt, a: a, c: c, o: o, dlq: dlq})
}

// tapPointName names a step's tap point: its kind, then kind#2, kind#3…
// for a kind's later steps.
func tapPointName(before []string, kind string) string {
	n := 1
	for _, b := range before {
		if b == kind || strings.HasPrefix(b, kind+"#") {
			n++
		}
	}
	if n == 1 {
		return kind
	}
	return fmt.Sprintf("%s#%d", kind, n)
}
