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
)

// TestStreamRemoves: what in a stream's configuration can remove a
// message no consumer acknowledged. Only what is known to keep every
// message passes: no age limit, no TTLs, no rollups, and count and size
// limits that refuse the publish.
func TestStreamRemoves(t *testing.T) {
	tests := []struct {
		name string
		cfg  jetstream.StreamConfig
		want []string // nil: the stream keeps its messages
	}{
		{"no limits", jetstream.StreamConfig{}, nil},
		{"work queue", jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy}, nil},
		{"interest", jetstream.StreamConfig{Retention: jetstream.InterestPolicy}, nil},
		{"limits refusing the publish", jetstream.StreamConfig{MaxMsgs: 10, MaxBytes: 1 << 20, Discard: jetstream.DiscardNew}, nil},
		{"per subject refusing the publish", jetstream.StreamConfig{MaxMsgsPerSubject: 5, Discard: jetstream.DiscardNew, DiscardNewPerSubject: true}, nil},
		{"unlimited values", jetstream.StreamConfig{MaxMsgs: -1, MaxBytes: -1, MaxMsgsPerSubject: -1}, nil},
		{"max_age", jetstream.StreamConfig{MaxAge: time.Hour, Discard: jetstream.DiscardNew}, []string{"max_age 1h0m0s"}},
		{"max_msgs discarding old", jetstream.StreamConfig{MaxMsgs: 10}, []string{"max_msgs 10"}},
		{"max_bytes discarding old", jetstream.StreamConfig{MaxBytes: 4096}, []string{"max_bytes 4096"}},
		{"per subject without discard_new_per_subject", jetstream.StreamConfig{MaxMsgsPerSubject: 5, Discard: jetstream.DiscardNew}, []string{"max_msgs_per_subject 5"}},
		{"message TTLs", jetstream.StreamConfig{AllowMsgTTL: true}, []string{"allow_msg_ttl"}},
		{"rollups", jetstream.StreamConfig{AllowRollup: true}, []string{"allow_rollup_hdrs"}},
		{"several", jetstream.StreamConfig{MaxAge: time.Minute, MaxMsgs: 3}, []string{"max_age 1m0s", "max_msgs 3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := streamRemoves(tc.cfg)
			if len(got) != len(tc.want) {
				t.Fatalf("streamRemoves = %q, want %d reasons %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("reason %d %q does not say %q", i, got[i], w)
				}
			}
		})
	}
}

// premiseRouteSrc is a compiled JetStream route into SQLite: its plan
// carries the stream_keeps_messages premise unless stream_limits =
// accept. Placeholders: url, subject, stream, extra source attribute,
// SQLite file.
const premiseRouteSrc = `
route consume {
  from nats {
    url     = "%s"
    subject = "%s"
    stream  = "%s"
    durable = "mqb-consume"
    %s
  }
  id payload.order_id
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL)"
    insert_query = "INSERT INTO orders (id, amount) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"
  }
}
`

// TestNATSStreamKeepsMessagesPremise: a route over a stream whose limits
// can remove a message before the route commits it is refused before the
// first record, naming the limit and the two ways on; a stream that
// keeps its messages, and stream_limits = accept (at-most-once, without
// the premise), run.
func TestNATSStreamKeepsMessagesPremise(t *testing.T) {
	url := testsrv.NATS(t)
	_, js := jetStreamOf(t, url)
	tests := []struct {
		name   string
		cfg    jetstream.StreamConfig
		accept bool
		want   string // "" runs
	}{
		{"no limits", jetstream.StreamConfig{}, false, ""},
		{"limits refusing the publish", jetstream.StreamConfig{MaxMsgs: 100, Discard: jetstream.DiscardNew}, false, ""},
		{"work queue", jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy}, false, ""},
		{"max_age", jetstream.StreamConfig{MaxAge: time.Hour}, false, "removes messages older than max_age 1h0m0s"},
		{"max_msgs", jetstream.StreamConfig{MaxMsgs: 100}, false, "discards its oldest message past max_msgs 100"},
		{"max_age accepted", jetstream.StreamConfig{MaxAge: time.Hour}, true, ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stream, subject := fmt.Sprintf("KEEP%d", i), fmt.Sprintf("keep%d.orders", i)
			cfg := tc.cfg
			cfg.Name, cfg.Subjects = stream, []string{subject}
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			for n := range 5 {
				if _, err := js.Publish(ctx, subject, fmt.Appendf(nil, `{"order_id":"o-%d","amount":%d}`, n, n)); err != nil {
					t.Fatal(err)
				}
			}
			extra := ""
			if tc.accept {
				extra = "stream_limits = accept"
			}
			db := filepath.Join(t.TempDir(), "orders.db")
			p := plantest.Compile(t, fmt.Sprintf(premiseRouteSrc, url, subject, stream, extra, db))
			hasPremise := false
			for _, pr := range p.Routes[0].Premises {
				hasPremise = hasPremise || pr.Kind == plan.PremiseStreamKeepsMessages
			}
			if hasPremise == tc.accept {
				t.Fatalf("stream_limits accept=%v: premise in the plan = %v (%+v)", tc.accept, hasPremise, p.Routes[0].Premises)
			}
			if tc.accept && p.Routes[0].Guarantee != plan.AtMostOnce {
				t.Errorf("verdict %s with stream_limits = accept, want at-most-once", p.Routes[0].Guarantee)
			}
			if tc.want == "" {
				runtest.RunUntil(t, p, runtest.Options(), time.Minute, func() bool { return runtest.CountRows(t, db) == 5 })
				return
			}
			err := runUntilStopped(t, p, runtest.Options())
			if err == nil {
				t.Fatal("the route started over a stream that can remove messages")
			}
			for _, w := range []string{"premise not met", "stream " + stream + " " + tc.want, "stream_limits = accept", "nats stream edit " + stream} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "plan the route at-least-once") {
				t.Errorf("the error offers at-least-once, which reads by the same stream:\n%v", err)
			}
			if n := runtest.CountRows(t, db); n > 0 {
				t.Errorf("%d rows written by a refused route", n)
			}
		})
	}
}
