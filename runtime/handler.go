package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"

	"github.com/mqb-dev/mqb/plan"
)

// handlerSink is a route's `handle <kind> { … }`: a publisher wrapper, so on
// the output side the order is handler → output steps → sink. Each write
// hands the live records to the handler endpoint first (built like any
// sink); the records as the handler left them — tagged with
// meta["sql.outcome"] by a SQL handler with report_outcome, say — go on to
// the sink. A record the handler failed on its own keeps its error and is
// not written to the sink: the route dead-letters it. A failure of the whole
// batch fails the write (retryable when the handler's error is).
//
// It is part of the engine, where the structural outputs (switch, fanout,
// request) are a connector of their own, connector/structural: it is a
// role of the route (plan.RoleHandler), not a kind in the registry, and it
// runs the route's output-side steps between the handler and the sink,
// reading and setting the records' engine state (filtered, dead), which no
// package outside runtime sees. Like them it is a BranchingSink, so
// premises and guarantee checks find the endpoints inside it.
//
// The sink's idempotency comes after the handler, so it cannot keep a
// replay away from it: a crash after the handler ran and before the commit
// runs it again, unless a dedup step on the input side filters the
// duplicate. Within one process, though, a write the route retries because
// the sink failed after the handler succeeded does not run the handler
// again: the handler's result for each record is kept until the sink takes
// it, as the request endpoint keeps its call's responses.
type handlerSink struct {
	route   string
	pos     string
	name    string // "handle <kind>", in errors
	log     *slog.Logger
	handler sink
	next    sink
	// after are the output-side steps, run over what the handler passed,
	// before the sink.
	after []recordStep

	mu      sync.Mutex
	handled map[*Record]handledRecord
}

// handledRecord is what the handler left a record as. seq guards against a
// record slot reused for another record.
type handledRecord struct {
	seq    uint64
	meta   map[string]string
	failed string
	state  recState
}

// buildHandler wraps next, the route's sink, in the handler plan node n
// declares. progs are the handler's expressions.
func (rt *route) buildHandler(ctx context.Context, n *plan.Node, next sink, c *compiler, o *Options, guarantee string) (*handlerSink, []*program, error) {
	h, progs, err := rt.buildSink(ctx, nodeAttrs{route: rt.name, node: n}, c, o, false)
	if err != nil {
		return nil, nil, err
	}
	s := &handlerSink{
		route: rt.name, pos: n.Pos.String(), name: "handle " + n.Kind,
		log: rt.log, handler: h, next: next,
	}
	if guarantee == plan.EffectivelyOnce {
		rt.log.Info("handler runs before the sink's idempotency: a replay after a crash runs it again unless a dedup step on the input side filtered the duplicate, so its own effect must be idempotent to land once",
			"handler", n.Kind, "pos", s.pos)
	}
	return s, progs, nil
}

// Branches makes the handler a BranchingSink: the engine finds the
// premise targets and guarantee checks of both the handler and the sink.
func (s *handlerSink) Branches() []sink { return []sink{s.handler, s.next} }

func (s *handlerSink) Close() error { return errors.Join(s.handler.Close(), s.next.Close()) }

func (s *handlerSink) Write(ctx context.Context, recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	// Records a retried write already handled are not handled again.
	toHandle := recs
	s.mu.Lock()
	if len(s.handled) > 0 {
		toHandle = make([]*Record, 0, len(recs))
		for _, r := range recs {
			if h, ok := s.handled[r]; ok && h.seq == r.Seq {
				r.Meta, r.id, r.hasID, r.idValue = maps.Clone(h.meta), "", false, nil
				r.sinkErr = h.failed
				r.state = h.state
				continue
			}
			toHandle = append(toHandle, r)
		}
	}
	s.mu.Unlock()
	if len(toHandle) > 0 {
		if err := s.handler.Write(ctx, toHandle); err != nil {
			return fmt.Errorf("%s (%s): %w", s.name, s.pos, err)
		}
		prefixRecordErrors(toHandle, s.name)
		s.runAfter(toHandle)
	}
	pass := make([]*Record, 0, len(recs))
	for _, r := range recs {
		if r.sinkErr == "" && r.state == stLive {
			pass = append(pass, r)
		}
	}
	if len(pass) == 0 {
		s.forget(recs)
		return nil
	}
	// The sink may tag the records too: keep them as the handler left them.
	results := make([]handledRecord, len(recs))
	for i, r := range recs {
		results[i] = handledRecord{seq: r.Seq, meta: maps.Clone(r.metaView()), failed: r.sinkErr, state: r.state}
	}
	if err := s.next.Write(ctx, pass); err != nil {
		s.remember(recs, results)
		return err
	}
	s.forget(recs)
	return nil
}

// runAfter runs the output-side steps, in plan order, over the records the
// handler passed. A record a step fails on fails as if the sink had
// refused it alone (the route dead-letters it); a filtered one is acked
// as filtered and never reaches the sink.
func (s *handlerSink) runAfter(recs []*Record) {
	if len(s.after) == 0 {
		return
	}
	w := &worker{}
	for _, st := range s.after {
		for _, r := range recs {
			if r.sinkErr == "" && r.state == stLive {
				st.applyRecord(w, r)
			}
		}
	}
	for _, r := range recs {
		if r.state == stDead {
			r.state, r.sinkErr = stLive, r.reason
		}
	}
}

// prefixRecordErrors names the handler in the per-record failures it
// marked, so a dead-lettered record says the handler refused it.
func prefixRecordErrors(recs []*Record, prefix string) {
	for _, r := range recs {
		if r.sinkErr != "" && !strings.HasPrefix(r.sinkErr, prefix) {
			r.sinkErr = prefix + ": " + r.sinkErr
		}
	}
}

// remember keeps the handler's result for every record of a write the sink
// failed, for the route's retry of it.
func (s *handlerSink) remember(recs []*Record, results []handledRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handled == nil {
		s.handled = map[*Record]handledRecord{}
	}
	for i, r := range recs {
		s.handled[r] = results[i]
	}
}

func (s *handlerSink) forget(recs []*Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.handled) == 0 {
		return
	}
	for _, r := range recs {
		delete(s.handled, r)
	}
}
