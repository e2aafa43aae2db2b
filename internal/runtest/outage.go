package runtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Outage is a run of a route through an outage of a server it talks to:
// the route is started, and once underway holds (it has moved records)
// outage is called, which stops the server and starts it again. Then the
// route either rides through (reconnects, retries) until done holds, or
// stops by itself with an error.
type Outage struct {
	Plan     plan.Plan
	Route    string
	Underway func() bool // the route has moved records: time for the outage
	Outage   func()      // stops the server, waits, starts it again
	// Done says the target holds everything the route must deliver; nil
	// for a route that ends by itself (a file read to its end).
	Done func() bool
	// Expect is what the route must do at the outage; a route that stops
	// must stop with an error naming each of StopSays, and a rerun must
	// finish.
	Expect   OutageEnd
	StopSays []string
	Limit    time.Duration    // for each of the two runs; 0 is 3 minutes
	Options  *runtime.Options // of both runs; nil is Options()
}

// OutageEnd is how a route may meet an outage.
type OutageEnd int

const (
	// RidesThrough: the route reconnects (or retries) and finishes in
	// the same run.
	RidesThrough OutageEnd = iota
	// Stops: the route stops with an error; a rerun finishes.
	Stops
	// RidesThroughOrStops: either, depending on when the outage lands (a
	// sink whose client retries a failed command a few times by itself
	// may carry a write over a short outage, or fail it).
	RidesThroughOrStops
)

// Run runs the route through the outage and, when it stopped as it
// should, a second time to the end, and returns the stats of the run
// that finished (their counts add up). A route that stops where it
// should ride through, rides through where it should stop, stops with an
// unclear error, or does not finish within the limit fails the test.
func (o Outage) Run(t *testing.T) runtime.RouteStats {
	t.Helper()
	limit := o.Limit
	if limit == 0 {
		limit = 3 * time.Minute
	}
	opts := Options()
	if o.Options != nil {
		opts = *o.Options
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type end struct {
		st  runtime.Stats
		err error
	}
	ended := make(chan end, 1)
	go func() {
		st, err := runtime.Run(ctx, o.Plan, opts)
		ended <- end{st, err}
	}()
	stopEarly := func(why string) {
		cancel()
		e := <-ended
		t.Fatalf("%s (stats %+v, err %v)", why, e.st.Route(o.Route), e.err)
	}
	if !WaitFor(o.Underway, time.Minute, 20*time.Millisecond) {
		stopEarly("the route moved nothing within a minute")
	}
	done := o.Done
	if done == nil {
		done = func() bool { return false }
	}
	select {
	case e := <-ended:
		t.Fatalf("the route ended before the outage: give it more records (stats %+v, err %v)", e.st.Route(o.Route), e.err)
	default:
	}
	if done() {
		stopEarly("the route was done before the outage: give it more records")
	}
	o.Outage()
	deadline := time.After(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case e := <-ended:
			if e.err == nil {
				// A finite source ends by itself once it delivered all.
				if o.Done != nil && !o.Done() {
					t.Fatalf("the route ended by itself, without an error, before it was done (stats %+v)", e.st.Route(o.Route))
				}
				return o.rodeThrough(t, e.st)
			}
			if o.Expect == RidesThrough {
				t.Fatalf("the route stopped at the outage, want it to ride through: %v", e.err)
			}
			for _, want := range o.StopSays {
				if !strings.Contains(e.err.Error(), want) {
					t.Errorf("the route stopped with %q, want it to say %q", e.err, want)
				}
			}
			t.Logf("stopped at the outage: %v", e.err)
			rs := RunUntil(t, o.Plan, opts, limit, done).Route(o.Route)
			CheckCounts(t, rs)
			return rs
		case <-deadline:
			stopEarly("not done within " + limit.String() + " after the outage")
		case <-tick.C:
			if !done() {
				continue
			}
			cancel()
			e := <-ended
			if e.err != nil {
				t.Fatalf("drain after the outage: %v", e.err)
			}
			return o.rodeThrough(t, e.st)
		}
	}
}

// rodeThrough checks that the route may ride through the outage, as it
// did, and returns its stats.
func (o Outage) rodeThrough(t *testing.T, st runtime.Stats) runtime.RouteStats {
	t.Helper()
	if o.Expect == Stops {
		t.Fatalf("the route rode through the outage, want it to stop with an error saying %q", o.StopSays)
	}
	t.Log("rode through the outage")
	rs := st.Route(o.Route)
	CheckCounts(t, rs)
	return rs
}

// SinkOutageCase is one run of a sink's outage test.
type SinkOutageCase struct {
	Name   string
	Retry  bool // the route has a retry step before its sink
	Expect OutageEnd
}

// SinkOutageCases are the two runs of a sink's outage test: with a retry
// step, which must ride through, and without one, which must end as
// noRetry says.
func SinkOutageCases(noRetry OutageEnd) []SinkOutageCase {
	return []SinkOutageCase{{"retry", true, RidesThrough}, {"no_retry", false, noRetry}}
}
