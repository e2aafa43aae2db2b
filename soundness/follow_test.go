//go:build soundness

package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
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
