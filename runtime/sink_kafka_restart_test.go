package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// A route with no retry step rides out a short broker restart: the sink
// sends a chunk again while the broker is away (a few attempts, backing
// off), so the write does not fail the route. At least once: nothing is
// missing.
func TestKafkaSinkRidesOutRestart(t *testing.T) {
	k := testsrv.NewKafka(t, "orders:2")
	e := newTestEnv(t)
	const n = 40000
	lines := writeOrders(t, e.input, n)
	p := brokerPlan(e, 256, plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{
		"url": strV(k.Brokers()), "topic": strV("orders"), "partition_key": tmplV(ex(`meta["mqb.id"]`))}})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := testOptions(t)
	onFirstProgress(&opts, 30*time.Millisecond, func(progress string) {
		t.Logf("restarting the broker: %s", progress)
		k.Restart(t, 200*time.Millisecond)
	})
	rs := runRouteWith(t, ctx, p, opts, "publish")

	total := checkTopicHasAll(t, k.Brokers(), "orders", 2, lines)
	t.Logf("%d messages for %d records (%d repeats); %+v", total, n, total-n, rs)
}
