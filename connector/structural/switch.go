package structural

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// unmatchedLogEvery is how often a switch without default logs the records
// it drops: the first one, then once per this many.
const unmatchedLogEvery = 1000

// switchSink routes each record to the first case whose value equals `on`
// (compared as strings), else to default. With no default, a record that
// matches no case is dropped — acked, counted in unmatched, and logged once
// per unmatchedLogEvery (the compiler warns W003 about such a switch).
type switchSink struct {
	route string
	pos   string
	log   *slog.Logger
	on    *runtime.Program

	cases   map[string]int // case value → index into outs (first case wins)
	dflt    int            // index into outs, or -1
	outs    []runtime.Sink
	names   []string // branchName of each out
	evals   sync.Pool
	pending sync.Pool // *[][]*Record, one slice per out (a pointer: Put of a slice allocates)

	unmatched *runtime.UnmatchedCount
}

// switchConfig is a switch's attributes (stdlib declares them); its cases
// are the node's branches, which no attribute holds.
type switchConfig struct {
	On string `attr:"on"` // an expression
}

func init() {
	runtime.RegisterSink("switch", func(b *runtime.BuildEnv, cfg *switchConfig) (runtime.Sink, []*runtime.Program, error) {
		return newSwitchSink(b, cfg)
	})
}

func newSwitchSink(b *runtime.BuildEnv, cfg *switchConfig) (_ *switchSink, progs []*runtime.Program, err error) {
	on, err := b.Compile(cfg.On)
	if err != nil {
		return nil, nil, b.Errorf("on", "%v", err)
	}
	route, log := b.Route(), b.Logger()
	s := &switchSink{route: route, pos: b.Pos().String(), log: log, on: on, cases: map[string]int{}, dflt: -1,
		unmatched: b.UnmatchedCount()}
	s.evals.New = func() any { return &runtime.Evaluator{} }
	defer func() {
		if err != nil {
			closeSinks(s.outs)
		}
	}()
	progs = append(progs, on)
	for i, br := range b.Branches() {
		switch br.Label {
		case plan.BranchCase:
			if _, dup := s.cases[br.Match]; dup {
				// The compiler rejects this; a hand-written plan gets the
				// first case, as the language says, and a log line.
				log.Warn("switch: duplicate case, the first one wins", "switch", s.pos, "case", br.Match)
				continue
			}
			s.cases[br.Match] = len(s.outs)
		case plan.BranchDefault:
			if s.dflt >= 0 {
				return nil, nil, fmt.Errorf("route %s: switch (%s): more than one default", route, s.pos)
			}
			s.dflt = len(s.outs)
		default:
			return nil, nil, fmt.Errorf("route %s: switch (%s): unexpected branch %q", route, s.pos, br.Label)
		}
		out, p, err := b.BuildBranch(i)
		if err != nil {
			return nil, nil, fmt.Errorf("switch (%s) %s: %w", s.pos, branchName(br, i), err)
		}
		s.outs = append(s.outs, out)
		s.names = append(s.names, branchName(br, i))
		progs = append(progs, p...)
	}
	if len(s.outs) == 0 {
		return nil, nil, fmt.Errorf("route %s: switch (%s): no case and no default", route, s.pos)
	}
	return s, progs, nil
}

func (s *switchSink) Branches() []runtime.Sink { return s.outs }

func (s *switchSink) Close() error { return closeSinks(s.outs) }

// Write splits recs by branch and writes the branches concurrently: they
// hold disjoint records, so no record is touched by two of them at once.
func (s *switchSink) Write(ctx context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	var split [][]*runtime.Record
	if p, ok := s.pending.Get().(*[][]*runtime.Record); ok {
		split = *p
	}
	if len(split) != len(s.outs) {
		split = make([][]*runtime.Record, len(s.outs))
	}
	for i := range split {
		split[i] = split[i][:0]
	}
	defer func() {
		for i := range split {
			clear(split[i]) // do not keep the batch's records alive
		}
		s.pending.Put(&split)
	}()

	ev := s.evals.Get().(*runtime.Evaluator)
	var dropped int64
	var sample string
	for _, r := range recs {
		v, present, err := ev.Run(s.on, r)
		if err != nil {
			r.Refuse(fmt.Sprintf("switch (%s) on: %v", s.pos, err))
			continue
		}
		out := s.dflt
		if present {
			key, err := runtime.Stringify(v)
			if err != nil {
				r.Refuse(fmt.Sprintf("switch (%s) on: %v", s.pos, err))
				continue
			}
			if i, ok := s.cases[key]; ok {
				out = i
			} else if sample == "" {
				sample = key
			}
		}
		if out < 0 {
			dropped++
			continue
		}
		split[out] = append(split[out], r)
	}
	s.evals.Put(ev)
	if dropped > 0 {
		s.countUnmatched(dropped, sample)
	}

	errs := make([]error, len(s.outs))
	var wg sync.WaitGroup
	busy := 0
	for i := range split {
		if len(split[i]) > 0 {
			busy++
		}
	}
	for i, part := range split {
		if len(part) == 0 {
			continue
		}
		write := func() {
			if err := s.outs[i].Write(ctx, part); err != nil {
				errs[i] = fmt.Errorf("switch (%s) %s: %w", s.pos, s.names[i], err)
				return
			}
			prefixRefusals(part, "switch "+s.names[i])
		}
		if busy == 1 {
			write()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); write() }()
	}
	wg.Wait()
	return joinBranchErrors(errs)
}

// countUnmatched counts records dropped for want of a case and a default,
// logging the first and then one line per unmatchedLogEvery. A retried
// batch counts its unmatched records again.
func (s *switchSink) countUnmatched(n int64, sample string) {
	total := s.unmatched.Add(n)
	if before := total - n; before == 0 || before/unmatchedLogEvery != total/unmatchedLogEvery {
		s.log.Warn("switch has no default: records matching no case dropped",
			"switch", s.pos, "dropped_unmatched", total, "value", sample)
	}
}
