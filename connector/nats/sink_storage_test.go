package nats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// TestNATSSinkWarnsOnMemoryStream: a stream on memory storage loses what
// it holds when the server restarts, though it acknowledged each publish;
// the sink says so at start-up, and says nothing of a stream on files.
func TestNATSSinkWarnsOnMemoryStream(t *testing.T) {
	url := testsrv.NATS(t)
	_, js := jetStreamOf(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, storage := range map[string]jetstream.StorageType{"MEM": jetstream.MemoryStorage, "DISK": jetstream.FileStorage} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Storage: storage}); err != nil {
			t.Fatal(err)
		}
	}
	for _, stream := range []string{"MEM", "DISK"} {
		t.Run(stream, func(t *testing.T) {
			e := plantest.NewEnv(t)
			plantest.WriteOrders(t, e.Input, 3)
			sink := plan.Node{Kind: "nats", Attrs: map[string]plan.Value{
				"url": plantest.Str(url), "subject": plantest.Str(strings.ToLower(stream) + ".new"), "stream": plantest.Str(stream)}}
			var logs runtest.Logs
			if rs := runtest.RunRoute(t, context.Background(), plantest.SinkPlan(e.Input, e.State, 16, sink), logs.Options(), "publish"); rs.Out != 3 {
				t.Fatalf("stats %+v, want out 3", rs)
			}
			warned := strings.Contains(logs.String(), "keeps its messages in memory")
			if warned != (stream == "MEM") {
				t.Errorf("warned %v about stream %s:\n%s", warned, stream, logs.String())
			}
		})
	}
}
