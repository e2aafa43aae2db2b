package runtime

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// brokerPlan is file → id payload.order_id → sink (a broker).
func brokerPlan(e testEnv, batch int, sink plan.Node) plan.Plan {
	sink.ID, sink.Role, sink.Side = "n2", plan.RoleSink, plan.SideOutput
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(e.input), "mode": enumV("consume"),
			"checkpoint_store": strV("pebble://" + e.state)}},
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Side: plan.SideInput, Expr: "payload.order_id"},
		sink,
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{
		Name: "publish", Guarantee: plan.AtLeastOnce, Concurrency: 2, BatchSize: batch,
		Nodes: nodes, Edges: chain(nodes)}}}
}

// writeOrders writes n JSON lines {"order_id": "o-i", "amount": i}.
func writeOrders(t testing.TB, path string, n int) []string {
	t.Helper()
	lines := make([]string, n)
	var b strings.Builder
	for i := range n {
		lines[i] = fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i)
		b.WriteString(lines[i])
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestKafkaSink(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders:3")
	e := newTestEnv(t)
	const n = 3000
	lines := writeOrders(t, e.input, n)
	sink := plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{
		"url": strV(brokers), "topic": strV("orders"),
		"partition_key": tmplV(lit("key-"), ex(`meta["mqb.id"]`))}}
	st, err := Run(context.Background(), brokerPlan(e, 256, sink), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route("publish")
	checkCounts(t, rs)
	if rs.Out != n {
		t.Fatalf("stats %+v, want out %d", rs, n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	ids := map[string]bool{}
	got := 0
	for p := range 3 {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(brokers, ","), Topic: "orders",
			Partition: p, MaxWait: 100 * time.Millisecond})
		conn, err := kafka.DialLeader(ctx, "tcp", strings.Split(brokers, ",")[0], "orders", p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < last; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("partition %d message %d: %v", p, i, err)
			}
			got++
			if !want[string(m.Value)] {
				t.Errorf("unexpected or repeated payload %s", m.Value)
			}
			delete(want, string(m.Value))
			h := map[string]string{}
			for _, x := range m.Headers {
				h[x.Key] = string(x.Value)
			}
			orderID := strings.TrimSuffix(strings.SplitN(string(m.Value), `"`, 5)[3], `"`)
			if string(m.Key) != "key-"+orderID {
				t.Errorf("key %q, want key-%s", m.Key, orderID)
			}
			if h["mqb.id"] != orderID {
				t.Errorf("header mqb.id %q, want %s", h["mqb.id"], orderID)
			}
			id, err := uuid.Parse(h[headerMessageID])
			if err != nil || len(h[headerMessageID]) != 36 {
				t.Errorf("header %s = %q: want a UUID string (%v)", headerMessageID, h[headerMessageID], err)
			} else if ids[id.String()] {
				t.Errorf("message_id %s on two messages", id)
			}
			ids[id.String()] = true
		}
		r.Close()
	}
	if got != n || len(want) != 0 {
		t.Errorf("read %d messages, %d payloads missing", got, len(want))
	}
}

func TestKafkaSinkMissingTopic(t *testing.T) {
	brokers := testsrv.Kafka(t, "orders")
	e := newTestEnv(t)
	writeOrders(t, e.input, 1)
	sink := plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{"url": strV(brokers), "topic": strV("nosuch")}}
	_, err := Run(context.Background(), brokerPlan(e, 16, sink), testOptions(t))
	if err == nil || !strings.Contains(err.Error(), "route publish") || !strings.Contains(err.Error(), "topic") {
		t.Fatalf("err %v, want an error naming the route and the topic", err)
	}
	t.Log(err)
}

func TestForwardedMeta(t *testing.T) {
	r := &Record{Meta: map[string]string{"mqb.src.topic": "in", "mqb.src.offset": "4", "mqb.id": "A-1", "trace": "x"}}
	if got := strings.Join(forwardedMeta(r), ","); got != "mqb.id,trace" {
		t.Errorf("forwarded %s, want mqb.id,trace", got)
	}
}

// BenchmarkKafkaSink: file → id → kafka (key = mqb.id) on the in-process
// Kafka-protocol broker.
func BenchmarkKafkaSink(b *testing.B) {
	const n = 100000
	brokers := testsrv.Kafka(b, "bench:3")
	input, size := benchInput(b, n)
	benchRun(b, n, size, func(i int, state string) plan.Plan {
		e := testEnv{input: input, state: state}
		p := brokerPlan(e, 1024, plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{
			"url": strV(brokers), "topic": strV("bench"), "partition_key": tmplV(ex(`meta["mqb.id"]`))}})
		p.Routes[0].Concurrency = 1
		return p
	})
}

// The broker restarts mid-run: with a retry step every record reaches the
// topic at least once (a broker cannot absorb a repeat).
func TestKafkaSinkBrokerRestart(t *testing.T) {
	k := testsrv.NewKafka(t, "orders:2")
	e := newTestEnv(t)
	const n = 40000
	lines := writeOrders(t, e.input, n)
	p := brokerPlan(e, 256, plan.Node{Kind: "kafka", Attrs: map[string]plan.Value{
		"url": strV(k.Brokers()), "topic": strV("orders"), "partition_key": tmplV(ex(`meta["mqb.id"]`))}})
	retry := plan.Node{ID: "r", Role: plan.RoleStep, Kind: "retry", Side: plan.SideOutput, Attrs: map[string]plan.Value{
		"attempts": intV(100), "backoff": {Type: plan.TDuration, Str: "100ms", Int: int64(100 * time.Millisecond)},
		"max_backoff": {Type: plan.TDuration, Str: "1s", Int: int64(time.Second)}}}
	nodes := p.Routes[0].Nodes
	p.Routes[0].Nodes = append(nodes[:2:2], retry, nodes[2])
	p.Routes[0].Edges = chain(p.Routes[0].Nodes)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := testOptions(t)
	restarted := make(chan struct{})
	opts.Progress = writerFunc(func(b []byte) (int, error) {
		select {
		case <-restarted:
		default:
			close(restarted)
			t.Logf("restarting the broker: %s", strings.TrimSpace(string(b)))
			k.Restart(t, 300*time.Millisecond)
		}
		return len(b), nil
	})
	opts.ProgressInterval = 30 * time.Millisecond
	st, err := Run(ctx, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Route("publish")
	checkCounts(t, rs)

	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	total := 0
	for part := range 2 {
		conn, err := kafka.DialLeader(ctx, "tcp", k.Brokers(), "orders", part)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{k.Brokers()}, Topic: "orders", Partition: part, MaxWait: 100 * time.Millisecond})
		for i := int64(0); i < last; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			delete(want, string(m.Value))
			total++
		}
		r.Close()
	}
	if len(want) != 0 {
		t.Errorf("%d records missing from the topic", len(want))
	}
	t.Logf("%d messages for %d records (%d repeats); %+v", total, n, total-n, rs)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
