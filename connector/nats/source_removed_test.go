package nats

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// limitedStream makes stream ORDERS keeping at most maxMsgs messages of
// subjects.
func limitedStream(t *testing.T, url string, subjects []string, maxMsgs int64, denyDelete bool) jetstream.JetStream {
	t.Helper()
	_, js := jetStreamOf(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: subjects, MaxMsgs: maxMsgs, DenyDelete: denyDelete}); err != nil {
		t.Fatal(err)
	}
	return js
}

// publishRange publishes orders o-from … o-(to-1) to orders.new.
func publishRange(t *testing.T, js jetstream.JetStream, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := from; i < to; i++ {
		if _, err := js.Publish(ctx, "orders.new", fmt.Appendf(nil, `{"order_id":"o-%d","amount":%d}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// runUntilStopped runs p until it stops by itself (or 30s pass) and
// returns its error.
func runUntilStopped(t *testing.T, p plan.Plan, opts runtime.Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := runtime.Run(ctx, p, opts)
	if ctx.Err() != nil {
		t.Fatal("the route did not stop by itself")
	}
	return err
}

// TestNATSSourceMessagesRemovedBeforeRead: a route read orders 0–9 and
// stopped; 100 more came to a stream keeping 50 (max_msgs) and denying
// deletes, so the messages at stream sequences 11–60 were removed before
// the consumer was delivered them. The consumer would go on from 61 as
// if they had never been; the route stops instead, naming them, and
// reads nothing past them.
func TestNATSSourceMessagesRemovedBeforeRead(t *testing.T) {
	url := testsrv.NATS(t)
	js := limitedStream(t, url, []string{"orders.new"}, 50, true)
	db := filepath.Join(t.TempDir(), "orders.db")
	p := natsSQLitePlan(url, db, 64, 1, 30*time.Second)
	publishRange(t, js, 0, 10)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 10 })

	publishRange(t, js, 10, 110)
	for range 2 { // and again at a rerun
		err := runUntilStopped(t, p, runtest.Options())
		if err == nil {
			t.Fatal("the route ran on past messages removed before it read them")
		}
		for _, want := range []string{"stream ORDERS durable mqb-orders", "stream sequences 11 to 60 (50) were removed", "to go on from sequence 61"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if n := runtest.CountRows(t, db); n != 10 {
			t.Fatalf("%d rows, want the 10 of the first run", n)
		}
	}
}

// TestNATSSourceMessagesRemovedAccepted: the same loss under
// stream_limits = accept (a route the plan calls at-most-once) is warned
// about, naming the sequences, and the route reads on from sequence 61.
func TestNATSSourceMessagesRemovedAccepted(t *testing.T) {
	url := testsrv.NATS(t)
	js := limitedStream(t, url, []string{"orders.new"}, 50, true)
	db := filepath.Join(t.TempDir(), "orders.db")
	p := natsSQLitePlan(url, db, 64, 1, 30*time.Second)
	p.Routes[0].Guarantee = plan.AtMostOnce
	p.Routes[0].Nodes[0].Attrs["stream_limits"] = plantest.Enum("accept")
	publishRange(t, js, 0, 10)
	runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 10 })

	publishRange(t, js, 10, 110)
	logs := &runtest.Logs{}
	runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 60 })
	for _, want := range []string{"50 messages (stream sequences 11 to 60) were removed", "stream_limits = accept: the route reads on"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the logs do not say %q:\n%s", want, logs)
		}
	}
}

// TestNATSSourceLimitsRemovedReadMessages: limits that removed only
// messages the consumer was delivered and acked, and a consumer made on
// a stream whose first messages were already removed, do not stop the
// route nor warn.
func TestNATSSourceLimitsRemovedReadMessages(t *testing.T) {
	url := testsrv.NATS(t)
	js := limitedStream(t, url, []string{"orders.new"}, 50, true)
	db := filepath.Join(t.TempDir(), "orders.db")
	p := natsSQLitePlan(url, db, 64, 1, 30*time.Second)
	logs := &runtest.Logs{}

	// Made on a stream that already dropped orders 0–49: it reads 50–99.
	publishRange(t, js, 0, 100)
	runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 50 })
	// 40 more: the limit removes only the 40 oldest, read and acked.
	publishRange(t, js, 100, 140)
	runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 90 })
	if strings.Contains(logs.String(), "removed") {
		t.Errorf("the logs say messages were removed:\n%s", logs)
	}
}

// TestNATSSourceRemovedUndecided: where the loss cannot be told for sure
// (the stream allows deletes, or the consumer's filter covers only some
// of its subjects), the route warns and reads on.
func TestNATSSourceRemovedUndecided(t *testing.T) {
	for _, c := range []struct {
		name       string
		subjects   []string
		denyDelete bool
		want       string
	}{
		{"deletes allowed", []string{"orders.new"}, false, "deny_delete is off"},
		{"filter covers some subjects", []string{"orders.>"}, true, "covers only some of the stream's subjects (orders.>)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := testsrv.NATS(t)
			js := limitedStream(t, url, c.subjects, 50, c.denyDelete)
			db := filepath.Join(t.TempDir(), "orders.db")
			p := natsSQLitePlan(url, db, 64, 1, 30*time.Second)
			publishRange(t, js, 0, 10)
			runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 10 })
			publishRange(t, js, 10, 110)
			logs := &runtest.Logs{}
			runtest.RunUntil(t, p, logs.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 60 })
			for _, want := range []string{"up to 50 messages (stream sequences 11 to 60)", c.want} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the logs do not say %q:\n%s", want, logs)
				}
			}
		})
	}
}

func TestFilterCovers(t *testing.T) {
	for _, c := range []struct {
		subjects []string
		filter   string
		want     bool
	}{
		{[]string{"orders.new"}, "orders.new", true},
		{[]string{"orders.new"}, "orders.*", true},
		{[]string{"orders.new", "orders.old"}, "orders.new", false},
		{[]string{"orders.>"}, "orders.new", false},
		{[]string{"orders.>"}, "orders.>", true},
		{[]string{"orders.*"}, "orders.>", true},
		{[]string{"orders.*.x"}, "orders.*.x", true},
		{[]string{"orders.*.x"}, "orders.a.x", false},
		{[]string{"orders"}, "orders.>", false},
		{[]string{"a.b"}, ">", true},
		{nil, "orders.new", false},
	} {
		if got := filterCovers(c.subjects, c.filter); got != c.want {
			t.Errorf("filterCovers(%q, %q) = %v, want %v", c.subjects, c.filter, got, c.want)
		}
	}
}
