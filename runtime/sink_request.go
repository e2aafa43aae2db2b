package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"

	"github.com/mqb-dev/mqb/plan"
)

// requestSink writes each record to `call`, then forwards the call's
// response to `forward`: the record as the call left it — tagged, say, with
// meta["sql.outcome"] = inserted | existed by a SQL sink with
// report_outcome. A record the call failed on its own is forwarded as it was
// before the call (its metadata restored, so it carries no outcome), as the
// spec's request endpoint does; a `switch` forward should keep a default for
// those. The route acks a record only once forward wrote it.
//
// The outcome a call reports is only truthful on the first attempt: when a
// forward fails after the call committed, the retry (or a replay after a
// crash) calls again and a key-addressed call now answers "existed".
type requestSink struct {
	route string
	pos   string
	log   *slog.Logger
	call  sink
	fwd   sink
	names [2]string

	callFailed atomic.Int64 // records forwarded as they were because the call failed them
}

func (rt *route) newRequestSink(ctx context.Context, a nodeAttrs, c *compiler, o *Options, dlq bool) (_ *requestSink, progs []*program, err error) {
	s := &requestSink{route: rt.name, pos: a.node.Pos.String(), log: rt.log}
	defer func() {
		if err != nil {
			closeSinks([]sink{s.call, s.fwd})
		}
	}()
	for i, b := range a.node.Children {
		var slot *sink
		switch b.Label {
		case plan.BranchCall:
			slot = &s.call
			s.names[0] = branchName(b, i)
		case plan.BranchForward:
			slot = &s.fwd
			s.names[1] = branchName(b, i)
		default:
			return nil, nil, fmt.Errorf("route %s: request (%s): unexpected branch %q", rt.name, s.pos, b.Label)
		}
		if *slot != nil {
			return nil, nil, fmt.Errorf("route %s: request (%s): more than one %s", rt.name, s.pos, b.Label)
		}
		out, p, err := rt.buildBranch(ctx, &a.node.Children[i].Node, c, o, dlq)
		if err != nil {
			return nil, nil, fmt.Errorf("request (%s) %s: %w", s.pos, branchName(b, i), err)
		}
		*slot = out
		progs = append(progs, p...)
	}
	if s.call == nil {
		return nil, nil, fmt.Errorf("route %s: request (%s): no call endpoint", rt.name, s.pos)
	}
	if s.fwd == nil {
		return nil, nil, fmt.Errorf("route %s: request (%s): no forward endpoint", rt.name, s.pos)
	}
	return s, progs, nil
}

func (s *requestSink) branches() []sink { return []sink{s.call, s.fwd} }

func (s *requestSink) verifyGuarantee(g string) error {
	return verifyBranches(s.branches(), g)
}

func (s *requestSink) Close() error { return closeSinks(s.branches()) }

func (s *requestSink) Write(ctx context.Context, recs []*Record) error {
	if len(recs) == 0 {
		return nil
	}
	// The metadata as it was before the call, for records the call fails.
	before := make([]map[string]string, len(recs))
	for i, r := range recs {
		before[i] = maps.Clone(r.Meta)
	}
	if err := s.call.Write(ctx, recs); err != nil {
		return fmt.Errorf("request (%s) %s: %w", s.pos, s.names[0], err)
	}
	var failed int64
	var first string
	for i, r := range recs {
		if r.sinkErr == "" {
			continue
		}
		if first == "" {
			first = r.sinkErr
		}
		failed++
		r.Meta = before[i]
		r.sinkErr = ""
	}
	if failed > 0 {
		s.callFailed.Add(failed)
		s.log.Warn("request: call failed for some records; forwarding them as they were",
			"request", s.pos, "records", failed, "first_error", first)
	}
	if err := s.fwd.Write(ctx, recs); err != nil {
		return fmt.Errorf("request (%s) %s: %w", s.pos, s.names[1], err)
	}
	prefixRecordErrors(recs, "request "+s.names[1])
	return nil
}
