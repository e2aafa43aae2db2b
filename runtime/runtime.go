package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// Options configure a Run.
type Options struct {
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// BaseDir resolves relative paths in the plan (files, sqlite://,
	// pebble://); empty means the process's working directory.
	BaseDir string
	// StateDir holds the checkpoint and dedup stores whose attribute is left
	// at its stdlib default (StateDir/state, StateDir/dedup); empty keeps
	// the declared defaults (.mqb/state, .mqb/dedup).
	StateDir string
	// Registerer receives the Prometheus metrics; nil registers none.
	Registerer prometheus.Registerer
	// Progress, when set, receives a progress line per file-source route
	// every ProgressInterval.
	Progress         io.Writer
	ProgressInterval time.Duration
	// Env resolves env("NAME") in expressions; nil means os.Getenv.
	Env stdlib.EnvLookup
	// Health, when set, is told each route's state (see Health).
	Health *Health
	// Tap, when set, lets watchers see records flow (see Tap).
	Tap *Tap
	// CommitInterval is how often each route checkpoints its contiguous
	// acked position (default 100ms; a drain or the end of a file always
	// commits). Longer means fewer fsyncs and more replay after a crash.
	CommitInterval time.Duration
	// Tracer, when set, receives a trace per batch and a span per commit
	// (see tracing.go); nil traces nothing and costs nothing.
	Tracer trace.TracerProvider
}

// RouteStats counts a route's records. Every record read ends in exactly
// one of the other counters once acked: In = Out + Deduplicated + Filtered
// + DeadLettered + Errors.
type RouteStats struct {
	Name string `json:"name"`
	In   int64  `json:"in"`
	Out  int64  `json:"out"`
	// Deduplicated counts records dropped by dedup, or skipped because a
	// part file already covers their position.
	Deduplicated int64 `json:"deduplicated"`
	Filtered     int64 `json:"filtered"`
	DeadLettered int64 `json:"dead_lettered"`
	// Errors counts records that failed with no DLQ to take them (logged
	// and dropped) or that the DLQ itself refused.
	Errors int64 `json:"errors"`
	// Added counts the records an unnest step made beyond the first of
	// each array (an array of n elements turns one record into n), so
	// In + Added = Out + Deduplicated + Filtered + DeadLettered + Errors.
	Added int64 `json:"added,omitempty"`
	// Committed is the number of leading records whose position is
	// checkpointed (the next record index to read on restart).
	Committed int64 `json:"committed"`
	// Unmatched counts records a switch with no default dropped because
	// they matched no case. They are acked and included in Out (the
	// route's output accepted them); a retried write counts them again.
	Unmatched int64 `json:"unmatched,omitempty"`
	// Interrupted is true when a drain (SIGINT/SIGTERM) stopped a route
	// whose source is finite before it was read to the end: what was
	// read is committed, and a rerun resumes at record Committed.
	Interrupted bool `json:"interrupted,omitempty"`
	// Unreplayable is true when the route's source cannot be read again
	// (stdin): an interrupted run's unread input is gone, not resumable.
	Unreplayable bool `json:"unreplayable,omitempty"`
}

// Stats is the outcome of a Run, one entry per route in plan order.
type Stats struct {
	Routes []RouteStats `json:"routes"`
}

// Route returns the stats of the route named name.
func (s Stats) Route(name string) RouteStats {
	for _, r := range s.Routes {
		if r.Name == name {
			return r
		}
	}
	return RouteStats{Name: name}
}

// Run executes every route of p concurrently. It returns when every route
// has ended (a finite source was read and committed to the end) or, after
// ctx is cancelled, when every route has drained: in-flight batches are
// finished and committed, stores closed, and the error is nil. A route that
// fails for good cancels the others and its error is returned.
func Run(ctx context.Context, p plan.Plan, opts Options) (Stats, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CommitInterval <= 0 {
		opts.CommitInterval = 100 * time.Millisecond
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = time.Second
	}
	metrics, err := newMetrics(opts.Registerer)
	if err != nil {
		return Stats{}, err
	}
	routes := make([]*route, 0, len(p.Routes))
	closeAll := func() error {
		var errs []error
		for _, rt := range routes {
			errs = append(errs, rt.close())
		}
		return errors.Join(errs...)
	}
	seen := map[string]bool{}
	for i := range p.Routes {
		pr := &p.Routes[i]
		if seen[pr.Name] {
			closeAll()
			return Stats{}, fmt.Errorf("route %s: duplicate route name", pr.Name)
		}
		seen[pr.Name] = true
		rt, err := buildRoute(ctx, pr, &opts)
		if err != nil && ctx.Err() != nil {
			// The drain signal came while the route was starting: its
			// start-up stopped on the cancelled context, not on a fault.
			closeAll()
			return Stats{}, &StartInterruptedError{Route: pr.Name, Err: err}
		}
		if err != nil {
			opts.Health.set(pr.Name, "failed", "refused to start")
			closeAll()
			return Stats{}, err
		}
		rt.health = opts.Health
		rt.tap = opts.Tap
		if opts.Tracer != nil {
			rt.tracer = opts.Tracer.Tracer(tracerName)
		}
		opts.Tap.addRoute(rt.name, append(append([]string{"source"}, rt.stepNames...), "sink"))
		rt.metrics = metrics.forRoute(pr.Name)
		routes = append(routes, rt)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopProgress := startProgress(runCtx, opts.Progress, opts.ProgressInterval, routes)
	errs := make([]error, len(routes))
	var wg sync.WaitGroup
	for i, rt := range routes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			rt.log.Info("route started", "guarantee", p.Routes[i].Guarantee)
			if err := rt.run(runCtx); err != nil {
				opts.Health.set(rt.name, "failed", "stopped on an error")
				errs[i] = err
				cancel() // one route failing for good stops the others
				return
			}
			opts.Health.set(rt.name, "ended", "")
			st := rt.snapshot()
			rt.log.Info("route ended", "in", st.In, "out", st.Out, "deduplicated", st.Deduplicated,
				"filtered", st.Filtered, "dead_lettered", st.DeadLettered, "errors", st.Errors, "added", st.Added,
				"elapsed", time.Since(start).Round(time.Millisecond))
		}()
	}
	wg.Wait()
	stopProgress()
	stats := Stats{Routes: make([]RouteStats, len(routes))}
	for i, rt := range routes {
		stats.Routes[i] = rt.snapshot()
	}
	if err := closeAll(); err != nil {
		errs = append(errs, err)
	}
	return stats, errors.Join(errs...)
}

// StartInterruptedError is Run's error when ctx was cancelled (a drain:
// SIGINT or SIGTERM) before every route had started. Nothing was read, so
// nothing was committed: a rerun resumes where the last run left off.
type StartInterruptedError struct {
	Route string // the route that was starting
	Err   error  // what its start-up returned on the cancelled context
}

func (e *StartInterruptedError) Error() string {
	return fmt.Sprintf("stopped while route %s was starting (%v): no record was read; a rerun resumes where the last run committed", e.Route, e.Err)
}

func (e *StartInterruptedError) Unwrap() error { return e.Err }

// interrupted reports whether the route's finite source was cut short by
// a drain: it never said it had nothing more, yet the route stopped
// without failing.
func (rt *route) interrupted() bool {
	fs, ok := rt.src.(finiteSource)
	return ok && fs.Finite() && !rt.ended.Load() && !rt.failed.Load()
}

// unmatchedDropped sums the records every switch in the route's sink
// dropped for want of a matching case and a default.
func (rt *route) unmatchedDropped() int64 {
	var n int64
	for _, c := range rt.unmatched {
		n += c.n.Load()
	}
	return n
}

func (rt *route) snapshot() RouteStats {
	return RouteStats{
		Name:         rt.name,
		In:           rt.stats.in.Load(),
		Out:          rt.stats.out.Load(),
		Deduplicated: rt.stats.deduplicated.Load(),
		Filtered:     rt.stats.filtered.Load(),
		DeadLettered: rt.stats.deadLettered.Load(),
		Errors:       rt.stats.errors.Load(),
		Added:        rt.stats.added.Load(),
		Committed:    rt.stats.committed.Load(),
		Unmatched:    rt.unmatchedDropped(),
		Interrupted:  rt.interrupted(),
		Unreplayable: rt.src != nil && !rt.src.Replayable(),
	}
}
