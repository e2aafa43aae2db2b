package structural

import (
	"context"
	"fmt"
	"strings"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// fanoutSink writes every record to each of its targets, one target after
// the other (they share the records, so two targets never touch one
// concurrently). A record is acked once every target took it; a record one
// target refused goes to the DLQ with every target's reason, though the
// other targets keep their copy.
//
// A target that fails the whole batch fails the write: the route retries it
// (with a retry step) or stops, and a restart replays the batch. Either way
// every target sees the batch again, including the targets that already
// wrote it, so the targets must be idempotent for the fanout to be
// effectively-once — which is what the compiler's proof requires of every
// branch before it calls the route so.
type fanoutSink struct {
	route   string
	pos     string
	targets []runtime.Sink
	names   []string
}

// fanoutConfig is a fanout's attributes: stdlib declares none; its targets
// are the node's branches.
type fanoutConfig struct{}

func init() {
	runtime.RegisterSink("fanout", func(b *runtime.BuildEnv, _ *fanoutConfig) (runtime.Sink, []*runtime.Program, error) {
		return newFanoutSink(b)
	})
}

func newFanoutSink(b *runtime.BuildEnv) (_ *fanoutSink, progs []*runtime.Program, err error) {
	s := &fanoutSink{route: b.Route(), pos: b.Pos().String()}
	defer func() {
		if err != nil {
			closeSinks(s.targets)
		}
	}()
	for i, br := range b.Branches() {
		if br.Label != plan.BranchTo {
			return nil, nil, fmt.Errorf("route %s: fanout (%s): unexpected branch %q", s.route, s.pos, br.Label)
		}
		out, p, err := b.BuildBranch(i)
		if err != nil {
			return nil, nil, fmt.Errorf("fanout (%s) %s: %w", s.pos, branchName(br, i), err)
		}
		s.targets = append(s.targets, out)
		s.names = append(s.names, branchName(br, i))
		progs = append(progs, p...)
	}
	if len(s.targets) == 0 {
		return nil, nil, fmt.Errorf("route %s: fanout (%s): no `to` target", s.route, s.pos)
	}
	return s, progs, nil
}

func (s *fanoutSink) Branches() []runtime.Sink { return s.targets }

func (s *fanoutSink) Close() error { return closeSinks(s.targets) }

func (s *fanoutSink) Write(ctx context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	// reasons[j] gathers record j's per-target failures; each target
	// starts from a record not refused, so it does not inherit another's
	// refusal.
	var reasons []strings.Builder
	for i, t := range s.targets {
		for _, r := range recs {
			r.Refuse("")
		}
		if err := t.Write(ctx, recs); err != nil {
			return fmt.Errorf("fanout (%s) %s: %w", s.pos, s.names[i], err)
		}
		for j, r := range recs {
			why := r.Refused()
			if why == "" {
				continue
			}
			if reasons == nil {
				reasons = make([]strings.Builder, len(recs))
			}
			if reasons[j].Len() > 0 {
				reasons[j].WriteString("; ")
			}
			reasons[j].WriteString("fanout " + s.names[i] + ": " + why)
		}
	}
	for j, r := range recs {
		r.Refuse("")
		if reasons != nil {
			r.Refuse(reasons[j].String())
		}
	}
	return nil
}
