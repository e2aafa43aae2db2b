package kafkabroker

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestParseTopic(t *testing.T) {
	for _, tc := range []struct {
		spec       string
		name       string
		partitions int
		err        bool
	}{
		{spec: "orders", name: "orders", partitions: 2},
		{spec: "orders:6", name: "orders", partitions: 6},
		{spec: "orders:0", err: true},
		{spec: "orders:x", err: true},
		{spec: ":3", err: true},
	} {
		name, n, err := ParseTopic(tc.spec, 2)
		if (err != nil) != tc.err || name != tc.name || n != tc.partitions {
			t.Errorf("ParseTopic(%q) = %q, %d, %v", tc.spec, name, n, err)
		}
	}
}

func TestStartSeedsTopics(t *testing.T) {
	c, err := Start(Config{Topics: []string{"a:3", "b"}, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.ListenAddrs()) != 1 {
		t.Fatalf("listening on %v, want one broker", c.ListenAddrs())
	}
	for topic, want := range map[string]int32{"a": 3, "b": 2} {
		var n int32
		for p := int32(0); p < 10; p++ {
			if c.LeaderFor(topic, p) >= 0 {
				n++
			}
		}
		if n != want {
			t.Errorf("topic %s has %d partitions, want %d", topic, n, want)
		}
	}
}

// TestReaperRemovesMemberKilledMidJoin: a member whose connection dies
// while its join waits for the group's rebalance is in the next generation
// with partitions assigned, and kfake never times it out. The reaper must
// remove it, so the live member ends up holding every partition again.
func TestReaperRemovesMemberKilledMidJoin(t *testing.T) {
	c, err := Start(Config{Topics: []string{"t:4"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	g, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID: "g", Brokers: []string{addr}, Topics: []string{"t"},
		HeartbeatInterval: time.Second, SessionTimeout: 3 * time.Second,
		RebalanceTimeout: 2 * time.Second, JoinGroupBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var mu sync.Mutex
	held := 0 // partitions the live member holds in its newest generation
	go func() {
		for {
			gen, err := g.Next(context.Background())
			if errors.Is(err, kafkago.ErrGroupClosed) {
				return
			}
			if err == nil {
				mu.Lock()
				held = len(gen.Assignments["t"])
				mu.Unlock()
			}
		}
	}()
	holds := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return held == n }
	}
	waitFor(t, "the live member to hold all 4 partitions", 20*time.Second, holds(4))

	// The ghost: a JoinGroup (v3, which admits a member without a member
	// id round trip) whose connection is closed while the group waits
	// for the live member to rejoin (it learns of the rebalance from its
	// next heartbeat, up to a second later).
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3
	join.Group, join.ProtocolType = "g", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 3000, 2000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	proto := kmsg.NewJoinGroupRequestProtocol()
	proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, proto)
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("ghost")).AppendRequest(nil, join, 1)); err != nil {
		t.Fatal(err)
	}
	state := func(want string, n int) func() bool {
		return func() bool {
			i := c.GroupInfo("g")
			return i != nil && i.State == want && len(i.Members) == n
		}
	}
	waitFor(t, "the ghost's join to start a rebalance", 10*time.Second, state("PreparingRebalance", 2))
	conn.Close()
	waitFor(t, "a generation with the ghost in it", 10*time.Second, state("Stable", 2))
	// The live member learns of the new generation a moment after the
	// group is Stable (its Next returns it): wait for it rather than look
	// once. If it keeps every partition, the ghost holds none and the test
	// shows nothing.
	fewer := func() bool { mu.Lock(); defer mu.Unlock(); return held < 4 }
	waitFor(t, "the live member to give partitions to the ghost (else the test shows nothing)", 10*time.Second, fewer)
	members := func(n int) func() bool {
		return func() bool { i := c.GroupInfo("g"); return i != nil && len(i.Members) == n }
	}
	waitFor(t, "the ghost to be removed", 30*time.Second, members(1))
	waitFor(t, "the live member to hold all 4 partitions again", 20*time.Second, holds(4))
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
