package structural

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// requestSink writes each record to `call`, then forwards the call's
// response to `forward`: the record as the call left it — tagged, say, with
// meta["sql.outcome"] = inserted | existed by a SQL sink with
// report_outcome. A record the call failed on its own is forwarded as it was
// before the call (its metadata restored, so it carries no outcome), as the
// spec's request endpoint does; a `switch` forward should keep a default for
// those. The route acks a record only once forward wrote it.
//
// The outcome a call reports is only truthful on the first call: a second
// call of a key-addressed write answers "existed". So when forward fails
// the batch after the call succeeded, the sink keeps each record's response
// and the route's retry of that batch (the same records) forwards it again
// without calling again. A replay after a crash has no such memory: it
// calls again, and an order that was new may take the "existed" branch, as
// the spec warns.
//
// A call whose answer is more than metadata learns it is the call through
// CallResponder: the http sink then replaces the payload with the response
// body (only once the whole call succeeded, so a retried call sends the
// records as they were), and a kept response carries it on in the record.
type requestSink struct {
	route string
	pos   string
	log   *slog.Logger
	call  runtime.Sink
	fwd   runtime.Sink
	names [2]string

	// answered holds the response (metadata after the call) of records
	// whose forward failed, until a retry forwards them.
	mu       sync.Mutex
	answered map[*runtime.Record]answer

	callFailed atomic.Int64 // records forwarded as they were because the call failed them
}

// answer is a record's response kept for a retried forward. seq guards
// against a record slot reused for another record.
type answer struct {
	seq  uint64
	meta map[string]string
}

// requestConfig is a request's attributes: stdlib declares none; its call
// and forward endpoints are the node's branches.
type requestConfig struct{}

func init() {
	runtime.RegisterSink("request", func(b *runtime.BuildEnv, _ *requestConfig) (runtime.Sink, []*runtime.Program, error) {
		return newRequestSink(b)
	})
}

func newRequestSink(b *runtime.BuildEnv) (_ *requestSink, progs []*runtime.Program, err error) {
	s := &requestSink{route: b.Route(), pos: b.Pos().String(), log: b.Logger()}
	defer func() {
		if err != nil {
			closeSinks([]runtime.Sink{s.call, s.fwd})
		}
	}()
	for i, br := range b.Branches() {
		var slot *runtime.Sink
		switch br.Label {
		case plan.BranchCall:
			slot = &s.call
			s.names[0] = branchName(br, i)
		case plan.BranchForward:
			slot = &s.fwd
			s.names[1] = branchName(br, i)
		default:
			return nil, nil, fmt.Errorf("route %s: request (%s): unexpected branch %q", s.route, s.pos, br.Label)
		}
		if *slot != nil {
			return nil, nil, fmt.Errorf("route %s: request (%s): more than one %s", s.route, s.pos, br.Label)
		}
		out, p, err := b.BuildBranch(i)
		if err != nil {
			return nil, nil, fmt.Errorf("request (%s) %s: %w", s.pos, branchName(br, i), err)
		}
		if r, ok := out.(runtime.CallResponder); ok && br.Label == plan.BranchCall {
			r.RespondAsCall()
		}
		*slot = out
		progs = append(progs, p...)
	}
	if s.call == nil {
		return nil, nil, fmt.Errorf("route %s: request (%s): no call endpoint", s.route, s.pos)
	}
	if s.fwd == nil {
		return nil, nil, fmt.Errorf("route %s: request (%s): no forward endpoint", s.route, s.pos)
	}
	return s, progs, nil
}

func (s *requestSink) Branches() []runtime.Sink { return []runtime.Sink{s.call, s.fwd} }

func (s *requestSink) Close() error { return closeSinks(s.Branches()) }

func (s *requestSink) Write(ctx context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	// Records a retried batch already has a response for are not called
	// again.
	toCall := recs
	s.mu.Lock()
	if len(s.answered) > 0 {
		toCall = make([]*runtime.Record, 0, len(recs))
		for _, r := range recs {
			if a, ok := s.answered[r]; ok && a.seq == r.Seq {
				r.Meta = maps.Clone(a.meta)
				continue
			}
			toCall = append(toCall, r)
		}
	}
	s.mu.Unlock()
	// The metadata as it was before the call, for records the call fails.
	before := make([]map[string]string, len(toCall))
	for i, r := range toCall {
		before[i] = maps.Clone(r.Meta)
	}
	if len(toCall) > 0 {
		if err := s.call.Write(ctx, toCall); err != nil {
			return fmt.Errorf("request (%s) %s: %w", s.pos, s.names[0], err)
		}
	}
	var failed int64
	var first string
	for i, r := range toCall {
		why := r.Refused()
		if why == "" {
			continue
		}
		if first == "" {
			first = why
		}
		failed++
		r.Meta = before[i]
		r.Refuse("")
	}
	if failed > 0 {
		s.callFailed.Add(failed)
		s.log.Warn("request: call failed for some records; forwarding them as they were",
			"request", s.pos, "records", failed, "first_error", first)
	}
	// Forward may tag the records too: keep the responses as they are now.
	responses := make([]map[string]string, len(recs))
	for i, r := range recs {
		responses[i] = maps.Clone(r.Meta)
	}
	if err := s.fwd.Write(ctx, recs); err != nil {
		s.mu.Lock()
		if s.answered == nil {
			s.answered = map[*runtime.Record]answer{}
		}
		for i, r := range recs {
			s.answered[r] = answer{seq: r.Seq, meta: responses[i]}
		}
		s.mu.Unlock()
		return fmt.Errorf("request (%s) %s: %w", s.pos, s.names[1], err)
	}
	s.forget(recs)
	prefixRefusals(recs, "request "+s.names[1])
	return nil
}

// forget drops the kept responses of records forward has now taken.
func (s *requestSink) forget(recs []*runtime.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.answered) == 0 {
		return
	}
	for _, r := range recs {
		delete(s.answered, r)
	}
}
