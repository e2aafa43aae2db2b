package testsrv

import (
	"testing"
	"time"
)

// Stoppable is a server a test of an outage can take down: gracefully
// (Stop) or as a crash would (Kill), to Start it again on the same port
// and data.
type Stoppable interface {
	Stop(t testing.TB)
	Kill(t testing.TB)
	Start(t testing.TB)
}

// Down is one way a server goes down in a test of an outage.
type Down struct {
	Name string
	Take func(s Stoppable, t testing.TB)
}

// Downs are the ways a test of an outage takes a server down: a graceful
// stop, and a kill.
var Downs = []Down{{"stop", Stoppable.Stop}, {"kill", Stoppable.Kill}}

// Outage takes s down this way, keeps it down for downtime, and starts
// it again on the same port and data.
func (d Down) Outage(t testing.TB, s Stoppable, downtime time.Duration) {
	t.Helper()
	d.Take(s, t)
	time.Sleep(downtime)
	s.Start(t)
}
