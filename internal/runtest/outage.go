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
	Done     func() bool // the target holds everything the route must deliver
	// RidesThrough says what the route must do: reconnect and finish in
	// the same run, or stop with an error naming each of StopSays (and
	// then a rerun finishes).
	RidesThrough bool
	StopSays     []string
	Limit        time.Duration // for each of the two runs; 0 is 3 minutes
}

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type end struct {
		st  runtime.Stats
		err error
	}
	ended := make(chan end, 1)
	go func() {
		st, err := runtime.Run(ctx, o.Plan, Options())
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
	if o.Done() {
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
				if !o.Done() {
					t.Fatalf("the route ended by itself, without an error, before it was done (stats %+v)", e.st.Route(o.Route))
				}
				if !o.RidesThrough {
					t.Fatalf("the route rode through the outage, want it to stop with an error saying %q", o.StopSays)
				}
				rs := e.st.Route(o.Route)
				CheckCounts(t, rs)
				return rs
			}
			if o.RidesThrough {
				t.Fatalf("the route stopped at the outage, want it to ride through: %v", e.err)
			}
			for _, want := range o.StopSays {
				if !strings.Contains(e.err.Error(), want) {
					t.Errorf("the route stopped with %q, want it to say %q", e.err, want)
				}
			}
			t.Logf("stopped at the outage: %v", e.err)
			rs := RunUntil(t, o.Plan, Options(), limit, o.Done).Route(o.Route)
			CheckCounts(t, rs)
			return rs
		case <-deadline:
			stopEarly("not done within " + limit.String() + " after the outage")
		case <-tick.C:
			if !o.Done() {
				continue
			}
			cancel()
			e := <-ended
			if e.err != nil {
				t.Fatalf("drain after the outage: %v", e.err)
			}
			if !o.RidesThrough {
				t.Fatalf("the route rode through the outage, want it to stop with an error saying %q", o.StopSays)
			}
			rs := e.st.Route(o.Route)
			CheckCounts(t, rs)
			return rs
		}
	}
}
