package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
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
		log:         o.Logger.With("route", pr.Name),
		batchSize:   pr.BatchSize,
		concurrency: pr.Concurrency,
		retry:       retryPolicy{attempts: 1},
		commitEvery: o.CommitInterval,
		now:         time.Now,
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
			if err := rt.buildSource(a, c, o); err != nil {
				return rt, err
			}
		case plan.RoleStep:
			before := len(rt.steps)
			if err := rt.buildStep(a, c, o); err != nil {
				return rt, err
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
	if handlerNode != nil {
		h, progs, err := rt.buildHandler(ctx, handlerNode, rt.sink, c, o, pr.Guarantee)
		if err != nil {
			return rt, err
		}
		h.after = rt.outSteps
		rt.sink, rt.sinkProgs = h, append(progs, rt.sinkProgs...)
	}
	if v, ok := rt.sink.(guaranteeVerifier); ok {
		if err := v.verifyGuarantee(pr.Guarantee); err != nil {
			return rt, err
		}
	}
	if err := rt.wireOutbox(ctx); err != nil {
		return rt, err
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
	rt.needPayload, rt.payloadFields = payloadNeeds(progs)
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

func (rt *route) buildSource(a nodeAttrs, c *compiler, o *Options) error {
	if err := rt.buildSourceEndpoint(a, c, o); err != nil {
		return err
	}
	if _, ok := rt.src.position(nil); !ok {
		return nil // the broker keeps the position: no checkpoint store
	}
	cp, err := openCheckpointStore(a, o)
	if err != nil {
		return err
	}
	rt.cp = cp
	return nil
}

// buildSourceEndpoint sets rt.src (built, not opened) without its
// checkpoint store.
func (rt *route) buildSourceEndpoint(a nodeAttrs, c *compiler, o *Options) error {
	switch a.node.Kind {
	case "file":
		if err := rt.buildFileSource(a, o); err != nil {
			return err
		}
	case "kafka":
		if err := rt.buildKafkaSource(a, c, o.BaseDir); err != nil {
			return err
		}
	case "nats":
		if err := rt.buildNATSSource(a, c); err != nil {
			return err
		}
	case "sql":
		if err := rt.buildSQLSource(a, c); err != nil {
			return err
		}
	case "object_store":
		if err := rt.buildObjectSource(context.Background(), a, c, o); err != nil {
			return err
		}
	case "postgres_cdc":
		if err := rt.buildPGCDCSource(a, c); err != nil {
			return err
		}
	default:
		build, ok := sourceBuilders[a.node.Kind]
		if !ok {
			return fmt.Errorf("route %s: from %s (%s): this runtime cannot read from %s yet", rt.name, a.node.Kind, a.node.Pos, a.node.Kind)
		}
		if err := build(rt, a, c, o); err != nil {
			return err
		}
	}
	rt.srcFormat = rt.src.recordFormat()
	return nil
}

func (rt *route) buildFileSource(a nodeAttrs, o *Options) error {
	path := a.str("path", "")
	if path == "" {
		return a.errorf("path", "required")
	}
	if !filepath.IsAbs(path) && o.BaseDir != "" {
		path = filepath.Join(o.BaseDir, path)
	}
	s := &fileSource{
		route:     rt.name,
		pipeline:  a.node.Pos.File,
		log:       rt.log,
		path:      path,
		mode:      a.str("mode", modeConsume),
		format:    a.str("format", "json"),
		maxRecord: int(a.integer("max_record_bytes", 16<<20)),
		poll:      100 * time.Millisecond,
	}
	switch s.mode {
	case modeConsume, modeSubscribe, modeGroupSubscribe:
	default:
		return a.errorf("mode", "unknown mode %q", s.mode)
	}
	switch s.format {
	case "json", "text", "raw":
	default:
		return a.errorf("format", "format %q is not supported by the file source yet", s.format)
	}
	if s.maxRecord <= 0 {
		return a.errorf("max_record_bytes", "must be positive, got %d", s.maxRecord)
	}
	rt.src = s
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
	case "dedup":
		key, err := c.compile(a.expr("key", "message_id"))
		if err != nil {
			return a.errorf("key", "%v", err)
		}
		ttl, err := a.duration("ttl", 24*time.Hour)
		if err != nil {
			return err
		}
		ns := dedupNamespace(rt.name, len(rt.dedupStores)+1, a.str("namespace", ""))
		st, err := openDedupStore(a, o, ns)
		if err != nil {
			return err
		}
		rt.dedupStores = append(rt.dedupStores, st)
		rt.steps = append(rt.steps, &dedupStep{key: key, store: st, ttl: ttl, now: rt.now})
	case "retry":
		backoff, err := a.duration("backoff", 100*time.Millisecond)
		if err != nil {
			return err
		}
		maxBackoff, err := a.duration("max_backoff", 30*time.Second)
		if err != nil {
			return err
		}
		attempts := a.integer("attempts", 5)
		if attempts < 1 {
			return a.errorf("attempts", "must be at least 1, got %d", attempts)
		}
		rt.retry = retryPolicy{attempts: int(attempts), backoff: backoff, maxBackoff: maxBackoff}
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
	switch a.node.Kind {
	case "sql":
		s, err := newSQLSink(ctx, a, c, o.BaseDir)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	case "file":
		nameBy := a.str("name_by", "write_time")
		if _, set := a.value("name_by"); !set && a.boolean("idempotency", false) {
			nameBy = "source_position"
		}
		switch nameBy {
		case "write_time", "auto":
			s, err := newFileSink(a, o.BaseDir, dlq)
			return s, nil, err
		case "source_position":
			if dlq {
				return nil, nil, a.errorf("name_by", "a dead-letter file is written by time; source_position is not supported there")
			}
			epoch := ""
			if !rt.src.replayable() {
				epoch = fmt.Sprintf("%020d", time.Now().UnixNano())
			}
			s, err := newPartSink(a, o.BaseDir, rt.src, epoch)
			if err != nil {
				return nil, nil, err
			}
			rt.parts = s
			return s, nil, nil
		default:
			return nil, nil, a.errorf("name_by", "unknown value %q", nameBy)
		}
	case "object_store":
		s, err := newObjectSink(ctx, a, c, o, rt, dlq)
		if err != nil {
			return nil, nil, err
		}
		return s, nil, nil
	case "kafka":
		s, err := newKafkaSink(ctx, a, c, rt, o.BaseDir)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	case "nats":
		s, err := newNATSSink(ctx, a, c, rt)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	case "clickhouse":
		s, err := newClickHouseSink(ctx, a, c, rt)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	case "switch", "request", "fanout":
		return rt.buildStructural(ctx, a, c, o, dlq)
	}
	if build, ok := sinkBuilders[a.node.Kind]; ok {
		return build(ctx, rt, a, c, o, dlq)
	}
	return nil, nil, fmt.Errorf("route %s: to %s (%s): this runtime cannot write to %s yet (it writes to %s)",
		rt.name, a.node.Kind, a.node.Pos, a.node.Kind, strings.Join(sinkKinds(), ", "))
}

// sourceBuilders holds the sources whose file registers them in an init
// function, by kind; the builder sets rt.src.
var sourceBuilders = map[string]func(rt *route, a nodeAttrs, c *compiler, o *Options) error{}

// sinkBuilders holds the sinks whose file registers them in an init
// function, by kind.
var sinkBuilders = map[string]func(ctx context.Context, rt *route, a nodeAttrs, c *compiler, o *Options, dlq bool) (sink, []*program, error){}

// sinkKinds lists every kind buildSink can build, sorted.
func sinkKinds() []string {
	kinds := []string{"sql", "file", "object_store", "kafka", "nats", "clickhouse", "switch", "request", "fanout"}
	for k := range sinkBuilders {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return kinds
}
