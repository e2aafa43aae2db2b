package nats

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// jetStreamOf connects to url for the test's length.
func jetStreamOf(t testing.TB, url string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func natsStream(t testing.TB, url string) (*natsgo.Conn, jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	nc, js := jetStreamOf(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"},
		Duplicates: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, stream
}

func TestNATSSinkJetStream(t *testing.T) {
	url := testsrv.NATS(t)
	_, _, stream := natsStream(t, url)
	e := plantest.NewEnv(t)
	const n = 2000
	lines := plantest.WriteOrders(t, e.Input, n)
	sink := plan.Node{Kind: "nats", Attrs: map[string]plan.Value{
		"url": plantest.Str(url), "subject": plantest.Tmpl(plantest.Lit("orders."), plantest.Ex(`meta["mqb.id"]`)), "stream": plantest.Str("ORDERS")}}
	rs := runtest.RunRoute(t, context.Background(), plantest.SinkPlan(e.Input, e.State, 128, sink), runtest.Options(), "publish")
	if rs.Out != n {
		t.Fatalf("stats %+v, want out %d", rs, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for m := range batch.Messages() {
		got++
		delete(want, string(m.Data()))
		h := m.Headers()
		id := h.Get(jetstream.MsgIDHeader)
		if len(id) != 36 || h[runtime.HeaderMessageID][0] != id {
			t.Errorf("Nats-Msg-Id %q, %s %q: want the same UUID", id, runtime.HeaderMessageID, h[runtime.HeaderMessageID])
		}
		mqbID := h["mqb.id"]
		if len(mqbID) != 1 || m.Subject() != "orders."+mqbID[0] {
			t.Errorf("subject %s, mqb.id header %q", m.Subject(), mqbID)
		}
	}
	if got != n || len(want) != 0 {
		t.Errorf("read %d messages, %d payloads missing", got, len(want))
	}
}

// The same message_id published twice (a retried write) is stored once:
// the sink sends Nats-Msg-Id and the stream's duplicate window drops it.
func TestNATSSinkDuplicateWindow(t *testing.T) {
	url := testsrv.NATS(t)
	_, _, stream := natsStream(t, url)
	node := &plan.Node{Role: plan.RoleSink, Kind: "nats", Attrs: map[string]plan.Value{
		"url": plantest.Str(url), "subject": plantest.Str("orders.new")}}
	built, err := runtime.BuildSink(context.Background(), "dups", "", node, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := built.(*natsSink)
	defer s.Close()
	if s.stream != "ORDERS" {
		t.Errorf("stream found by subject: %q, want ORDERS", s.stream)
	}
	recs := []*runtime.Record{{Payload: []byte(`{"a":1}`)}, {Payload: []byte(`{"a":2}`)}, {Payload: []byte(`{"a":3}`)}}
	for range 2 {
		if err := s.Write(context.Background(), recs); err != nil {
			t.Fatal(err)
		}
	}
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Errorf("stream holds %d messages after publishing 3 twice, want 3", info.State.Msgs)
	}
}

func TestNATSSinkNoStream(t *testing.T) {
	url := testsrv.NATS(t)
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 1)
	sink := plan.Node{Kind: "nats", Attrs: map[string]plan.Value{"url": plantest.Str(url), "subject": plantest.Str("nowhere")}}
	runtest.RunRefused(t, plantest.SinkPlan(e.Input, e.State, 16, sink), []string{"route publish", "subject"})
}

func TestNATSSinkCore(t *testing.T) {
	url := testsrv.NATS(t)
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var got atomic.Int64
	sub, err := nc.Subscribe("core.>", func(m *natsgo.Msg) {
		if m.Header.Get(jetstream.MsgIDHeader) == "" && len(m.Header[runtime.HeaderMessageID]) == 1 {
			got.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()
	e := plantest.NewEnv(t)
	const n = 500
	plantest.WriteOrders(t, e.Input, n)
	sink := plan.Node{Kind: "nats", Attrs: map[string]plan.Value{"url": plantest.Str(url),
		"subject": plantest.Tmpl(plantest.Lit("core."), plantest.Ex(`meta["mqb.id"]`)), "no_jetstream": {Type: plan.TBool, Bool: true}}}
	if _, err := runtime.Run(context.Background(), plantest.SinkPlan(e.Input, e.State, 64, sink), runtest.Options()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for got.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got.Load() != n {
		t.Errorf("received %d of %d core NATS messages", got.Load(), n)
	}
}

func TestNATSSinkRedactsPassword(t *testing.T) {
	e := plantest.NewEnv(t)
	plantest.WriteOrders(t, e.Input, 1)
	sink := plan.Node{Kind: "nats", Attrs: map[string]plan.Value{"url": plantest.Str("nats://user:s3cret@127.0.0.1:1"), "subject": plantest.Str("x")}}
	runtest.RunRefused(t, plantest.SinkPlan(e.Input, e.State, 16, sink), []string{"route publish"}, "s3cret")
}

// TestNATSSinkOutage: file → JetStream while the server stops for two
// seconds. With a retry step the route rides through, and the
// Nats-Msg-Id absorbs what the retry publishes again: each order once.
// Without one it stops with an error naming the sink (unless the outage
// fell between writes, whose publishes the client buffers while it
// reconnects), and a rerun from the committed position publishes the
// rest under new message ids (a file's are minted per read): every order
// is there, some twice, as the route's verdict, at-least-once, allows.
func TestNATSSinkOutage(t *testing.T) {
	for _, tc := range runtest.SinkOutageCases(runtest.RidesThroughOrStops) {
		t.Run(tc.Name, func(t *testing.T) {
			srv := testsrv.NewNATS(t)
			_, _, stream := natsStream(t, srv.URL())
			e := plantest.NewEnv(t)
			const n = 60000
			plantest.WriteOrders(t, e.Input, n)
			// A subject per order: the stream's subject count is the
			// number of distinct orders it holds.
			sink := plan.Node{Kind: "nats", Attrs: map[string]plan.Value{
				"url":     plantest.Str(srv.URL()),
				"subject": plantest.Tmpl(plantest.Lit("orders."), plantest.Ex(`meta["mqb.id"]`)), "stream": plantest.Str("ORDERS")}}
			p := plantest.SinkPlan(e.Input, e.State, 256, sink)
			if tc.Retry {
				p = plantest.WithRetryAt(p, len(p.Routes[0].Nodes)-1, 100)
			}
			state := func() jetstream.StreamState {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				i, err := stream.Info(ctx, jetstream.WithSubjectFilter("orders.>"))
				if err != nil {
					return jetstream.StreamState{}
				}
				return i.State
			}
			rs := runtest.Outage{
				Plan: p, Route: "publish",
				Underway: func() bool { return state().Msgs > 0 },
				Outage:   func() { srv.Restart(t, 2*time.Second) },
				Done:     func() bool { return state().NumSubjects == n },
				Expect:   tc.Expect,
				StopSays: []string{"route publish", "nats sink", "server is disconnected"},
			}.Run(t)
			st := state()
			t.Logf("%d messages of %d orders; %+v", st.Msgs, st.NumSubjects, rs)
			if st.NumSubjects != n {
				t.Errorf("stream holds %d distinct orders, want %d", st.NumSubjects, n)
			}
			if tc.Retry && st.Msgs != n {
				t.Errorf("stream holds %d messages, want each of the %d orders once", st.Msgs, n)
			}
		})
	}
}
