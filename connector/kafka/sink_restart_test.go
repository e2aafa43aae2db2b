package kafka

import (
	"testing"
	"time"
)

// A route with no retry step rides out a short broker restart: the sink
// sends a chunk again while the broker is away (a few attempts, backing
// off), so the write does not fail the route. At least once: nothing is
// missing.
func TestKafkaSinkRidesOutRestart(t *testing.T) {
	publishThroughRestart(t, 40000, 200*time.Millisecond, 0)
}
