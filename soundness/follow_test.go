//go:build soundness

package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	amqp "github.com/rabbitmq/amqp091-go"
	goredis "github.com/redis/go-redis/v9"
)

// A drained run whose source still holds records for the routes stopped
// before reading them: it is stalled (the case inconclusive), and says how
// many; one whose source is empty keeps its result as it was.
func TestJudgeLeft(t *testing.T) {
	base := runResult{dur: 2900 * time.Millisecond}
	if r := judgeLeft(base, func() (int, error) { return 0, nil }); r.stalled || r.left != "" {
		t.Errorf("an empty source: stalled %v, left %q; want neither", r.stalled, r.left)
	}
	r := judgeLeft(base, func() (int, error) { return 252, nil })
	if !r.stalled || !strings.Contains(r.String(), "252 records still in the source") {
		t.Errorf("252 records left: stalled %v, %q", r.stalled, r)
	}
	r = judgeLeft(base, func() (int, error) { return 0, errors.New("queue sound_1_a: NOT_FOUND") })
	if !r.stalled || !strings.Contains(r.String(), "could not count") {
		t.Errorf("a count that failed: stalled %v, %q", r.stalled, r)
	}
	// A stall the drain found itself stays one.
	stalled := base
	stalled.stalled = true
	if r := judgeLeft(stalled, func() (int, error) { return 0, nil }); !r.stalled {
		t.Errorf("a run the drain found stalled is no longer stalled once its source is empty")
	}
}

// On RabbitMQ the harness counts as left both what no route was handed and
// what a route was handed and did not ack before its connection closed,
// and is caught up only once no message is ready.
func TestAMQPLeft(t *testing.T) {
	source := `from amqp { queue = "sound_0_left_a" }
from amqp { queue = "sound_0_left_b" }`
	h, err := startAMQPQueues(source)
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	url := strings.TrimPrefix(h.env[0], amqpURLEnv+"=")
	if err := h.feed("1\n2\n3\n"); err != nil {
		t.Fatal(err)
	}
	if h.caughtUp() {
		t.Errorf("caught up with 6 messages ready")
	}
	if n, err := h.left(); n != 6 || err != nil {
		t.Errorf("left: %d, %v; want 6", n, err)
	}
	// A route that read the three of queue a and acked two.
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume("sound_0_left_a", "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []amqp.Delivery
	for len(got) < 3 {
		select {
		case d := <-ds:
			got = append(got, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d deliveries", len(got))
		}
	}
	if err := got[1].Ack(true); err != nil {
		t.Fatal(err)
	}
	if n, err := amqpLeft(url, []string{"sound_0_left_a", "sound_0_left_b"}, 300*time.Millisecond); err == nil {
		t.Errorf("left while a consumer is still on the queue: %d, no error", n)
	}
	conn.Close()
	if n, err := h.left(); n != 4 || err != nil {
		t.Errorf("left once the route's connection closed with one delivery unacked: %d, %v; want 4", n, err)
	}
	// Everything read and acked: caught up, nothing left.
	conn, err = amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err = conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"sound_0_left_a", "sound_0_left_b"} {
		if _, err := ch.QueuePurge(q, false); err != nil {
			t.Fatal(err)
		}
	}
	if !h.caughtUp() {
		t.Errorf("not caught up with empty queues")
	}
	if n, err := h.left(); n != 0 || err != nil {
		t.Errorf("left with empty queues: %d, %v", n, err)
	}
}

// The drain asks the source what it still holds once the run it stopped
// has ended: a run stopped with records unread is stalled, and says how
// many; one whose source is empty is not.
func TestDrainCountsWhatTheSourceHolds(t *testing.T) {
	for _, n := range []int{0, 159} {
		ck, dir := stuckChecker(t) // "mqbc" is this binary, hanging until signalled
		ck.Timeout = time.Minute
		asked := false
		ck.srcs = map[string]*srcHandle{dir: {left: func() (int, error) { asked = true; return n, nil }}}
		r := ck.drain(dir, nil, ck.start(dir, nil))
		if !asked {
			t.Fatalf("%d left: the drain did not ask the source what it holds", n)
		}
		if want := n > 0; r.stalled != want || want && !strings.Contains(r.String(), "159 records still in the source") {
			t.Errorf("%d left: stalled %v, %q; want stalled %v", n, r.stalled, r, want)
		}
	}
}

// What a Redis stream holds for a group: its pending entries and those
// after its last-delivered id; a group not yet created holds them all.
func TestRedisBacklog(t *testing.T) {
	ids := []string{"5-0", "5-1", "9-0", "10-0", "10-2"}
	groups := []goredis.XInfoGroup{
		{Name: "route_a", Pending: 2, LastDeliveredID: "9-0"},
		{Name: "route_b", Pending: 0, LastDeliveredID: "10-2"},
		{Name: "other", Pending: 7, LastDeliveredID: "0-0"},
	}
	for _, tc := range []struct {
		want []string
		n    int
	}{
		{[]string{"route_a"}, 2 + 2},
		{[]string{"route_b"}, 0},
		{[]string{"route_c"}, 5}, // never created: every entry
		{[]string{"route_a", "route_b", "route_c"}, 9},
	} {
		if n := groupsBacklog(tc.want, groups, ids); n != tc.n {
			t.Errorf("backlog of %v: %d, want %d", tc.want, n, tc.n)
		}
	}
	if !streamIDLess("9-0", "10-0") || streamIDLess("10-0", "9-0") || !streamIDLess("10-0", "10-2") || streamIDLess("10-2", "10-2") {
		t.Errorf("stream ids are not ordered by number")
	}
	for _, tc := range []struct {
		want   []string
		length int64
		ok     bool
	}{
		{[]string{"route_b"}, 5, true},
		{[]string{"route_a"}, 5, false},            // pending entries, and entries not delivered
		{[]string{"route_b", "route_c"}, 5, false}, // route_c has not read
		{[]string{"route_c"}, 0, true},             // nothing to read
		{[]string{"route_b", "route_x"}, 0, true},
	} {
		if ok := groupsCaughtUp(tc.want, groups, tc.length, "10-2"); ok != tc.ok {
			t.Errorf("caught up %v (stream of %d): %v, want %v", tc.want, tc.length, ok, tc.ok)
		}
	}
	pending := []goredis.XInfoGroup{{Name: "route_b", Pending: 1, LastDeliveredID: "10-2"}}
	if groupsCaughtUp([]string{"route_b"}, pending, 5, "10-2") {
		t.Errorf("caught up with an entry delivered and not acknowledged")
	}
}

// On a real Redis the harness counts, per route's group, the entries
// delivered and not acknowledged and those not yet delivered, and is
// caught up only once every group has read and acknowledged the stream.
func TestRedisLeft(t *testing.T) {
	source := `from redis { url = "${env(\"SOUNDNESS_REDIS_URL\")}", stream = "in", group = "left_a" }
from redis { url = "${env(\"SOUNDNESS_REDIS_URL\")}", stream = "in", group = "left_b" }`
	h, err := startRedisStream(source)
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	u, err := goredis.ParseURL(strings.TrimPrefix(h.env[0], redisURLEnv+"="))
	if err != nil {
		t.Fatal(err)
	}
	rc := goredis.NewClient(u)
	defer rc.Close()
	ctx := t.Context()
	if n, err := h.left(); n != 0 || err != nil {
		t.Errorf("left before anything was fed: %d, %v; want 0", n, err)
	}
	if err := h.feed("1\n2\n3\n4\n"); err != nil {
		t.Fatal(err)
	}
	if h.caughtUp() {
		t.Errorf("caught up with no group created")
	}
	if n, err := h.left(); n != 8 || err != nil {
		t.Errorf("left with no group created: %d, %v; want 8", n, err)
	}
	// Route a creates its group, reads three entries and acknowledges one.
	if err := rc.XGroupCreateMkStream(ctx, "in", "left_a", "0").Err(); err != nil {
		t.Fatal(err)
	}
	read := func(group string, n int64) []string {
		res, err := rc.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: group, Consumer: group, Streams: []string{"in", ">"}, Count: n, Block: -1}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range res[0].Messages {
			ids = append(ids, m.ID)
		}
		return ids
	}
	ids := read("left_a", 3)
	if len(ids) != 3 {
		t.Fatalf("read %d entries, want 3", len(ids))
	}
	if err := rc.XAck(ctx, "in", "left_a", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := h.left(); n != 2+1+4 || err != nil {
		t.Errorf("left with two entries of a pending, one undelivered and b not created: %d, %v; want 7", n, err)
	}
	// Both read everything; a has one entry still pending.
	ids = append(ids[1:], read("left_a", 10)...)
	if err := rc.XGroupCreate(ctx, "in", "left_b", "0").Err(); err != nil {
		t.Fatal(err)
	}
	idsB := read("left_b", 10)
	if err := rc.XAck(ctx, "in", "left_b", idsB...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.XAck(ctx, "in", "left_a", ids[1:]...).Err(); err != nil {
		t.Fatal(err)
	}
	if h.caughtUp() {
		t.Errorf("caught up with an entry pending")
	}
	if n, err := h.left(); n != 1 || err != nil {
		t.Errorf("left with one entry pending: %d, %v; want 1", n, err)
	}
	if err := rc.XAck(ctx, "in", "left_a", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if !h.caughtUp() {
		t.Errorf("not caught up with every entry read and acknowledged")
	}
	if n, err := h.left(); n != 0 || err != nil {
		t.Errorf("left with every entry read and acknowledged: %d, %v", n, err)
	}
	// What is fed later is left until read.
	if err := h.feed("5\n"); err != nil {
		t.Fatal(err)
	}
	if h.caughtUp() {
		t.Errorf("caught up with an entry fed after the groups read")
	}
	if n, err := h.left(); n != 2 || err != nil {
		t.Errorf("left with one entry for each group: %d, %v; want 2", n, err)
	}
}

// The count of what an MQTT session holds ends at the mark published after
// the input, and skips the marks of earlier counts.
func TestMQTTCountBeforeMark(t *testing.T) {
	p := func(ss ...string) [][]byte {
		var out [][]byte
		for _, s := range ss {
			out = append(out, []byte(s))
		}
		return out
	}
	mark := mqttMarkPrefix + "2a"
	for _, tc := range []struct {
		payloads [][]byte
		n        int
		found    bool
	}{
		{p(mark), 0, true},
		{p("a", "b", mark), 2, true},
		{p("a", mqttMarkPrefix+"1f", "b", mark, "c"), 2, true},
		{p("a", "b"), 2, false},
		{nil, 0, false},
	} {
		if n, found := countBeforeMark(tc.payloads, mark); n != tc.n || found != tc.found {
			t.Errorf("%q: %d, %v; want %d, %v", tc.payloads, n, found, tc.n, tc.found)
		}
	}
}

// The sinks of an MQTT case must stand still longer than others': nothing
// tells the drain that its routes have read their sessions while they run.
func TestMQTTQuietWait(t *testing.T) {
	if q, other := quietPolls(&Case{Broker: brokerMQTT}), quietPolls(&Case{Broker: brokerAMQP}); q < 3*other {
		t.Errorf("mqtt drains after %d quiet polls, amqp after %d; want mqtt at least three times as long", q, other)
	}
}

// On Mosquitto the harness counts what each route's persistent session
// holds once its route is gone: the messages sent and not acknowledged
// (sent again on resuming) and those queued; a session holding nothing
// counts nothing, and one the broker no longer has cannot be counted.
func TestMQTTLeft(t *testing.T) {
	c := &Case{Seed: 990417}
	idA, idB := fmt.Sprintf("sound-%d-left_a", c.Seed), fmt.Sprintf("sound-%d-left_b", c.Seed)
	source := fmt.Sprintf("from mqtt { topic = %q, client_id = %q }\nfrom mqtt { topic = %q, client_id = %q }", c.mqttTopic(), idA, c.mqttTopic(), idB)
	h, err := startMQTTSessions(c, source)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			h.stop()
		}
	}()
	url := strings.TrimPrefix(h.env[0], mqttURLEnv+"=")
	if n, err := h.left(); n != 0 || err != nil {
		t.Errorf("left before anything was fed: %d, %v; want 0", n, err)
	}
	if err := h.feed("1\n2\n3\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := h.left(); n != 6 || err != nil {
		t.Errorf("left: %d, %v; want 6", n, err)
	}
	// consume resumes id's session, waits for want records (the marks of
	// the counts before are sent too), acknowledges the first ack of them
	// and every mark, and goes away.
	consume := func(id string, want, ack int) {
		t.Helper()
		var mu sync.Mutex
		var got []*paho.Publish
		records := 0
		s, present, err := mqttResume(url, id, func(p *paho.Publish) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, p)
			if !strings.HasPrefix(string(p.Payload), mqttMarkPrefix) {
				records++
			}
		})
		if err != nil || !present {
			t.Fatalf("resume %s: present %v, %v", id, present, err)
		}
		defer s.Disconnect(&paho.Disconnect{})
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			n := records
			mu.Unlock()
			if n >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d records, want %d", id, n, want)
			}
		}
		time.Sleep(200 * time.Millisecond) // the marks after the records
		mu.Lock()
		defer mu.Unlock()
		acked := 0
		for _, p := range got {
			if strings.HasPrefix(string(p.Payload), mqttMarkPrefix) || acked < ack {
				if !strings.HasPrefix(string(p.Payload), mqttMarkPrefix) {
					acked++
				}
				if err := s.Ack(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(300 * time.Millisecond) // the client sends acks every 50 ms
	}
	// Route a read the three and acknowledged one.
	consume(idA, 3, 1)
	if n, err := h.left(); n != 2+3 || err != nil {
		t.Errorf("left with two of a's unacknowledged and b's three queued: %d, %v; want 5", n, err)
	}
	consume(idA, 2, 2)
	consume(idB, 3, 3)
	if n, err := h.left(); n != 0 || err != nil {
		t.Errorf("left with every message acknowledged: %d, %v", n, err)
	}
	// Many queued messages are all counted: the count waits for the mark
	// rather than for the first lull.
	if err := h.feed(strings.Repeat("x\n", 2000)); err != nil {
		t.Fatal(err)
	}
	if n, err := h.left(); n != 4000 || err != nil {
		t.Errorf("left with 2000 queued in each session: %d, %v; want 4000", n, err)
	}
	h.stop() // ends the sessions
	stopped = true
	pub, err := mqttConnect(url, fmt.Sprintf("sound-%d-feed-after", c.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(&paho.Disconnect{})
	if n, err := mqttLeft(url, c.mqttTopic(), []string{idA}, pub, 2*time.Second); err == nil || !strings.Contains(err.Error(), "no session") {
		t.Errorf("left of a session the broker no longer has: %d, %v; want an error", n, err)
	}
}
