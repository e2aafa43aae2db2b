package nats

import (
	"context"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// The stream_keeps_messages premise. A JetStream consumer reads what the
// stream holds, and a stream's limits remove its oldest messages whether
// a consumer was delivered them or not: the server then drops them from
// the consumer's pending acknowledgements (removedcheck.go), so a message
// a crashed run held, or one the route fell behind on, is never
// delivered again. Before the first record the source reads the stream's
// configuration and accepts only what is known to keep every message
// until it is acknowledged (an allow-list): no age limit, no per-message
// TTLs, no rollups, and count and size limits only where the server
// refuses a publish past them instead of discarding the oldest message.
// The retention policy does not matter: limits, work-queue and interest
// streams all keep a message until its consumers acknowledge it, which
// the route does only after committing it.

// PremiseNode is the plan node the source was built from.
func (s *natsSource) PremiseNode() string { return s.node }

// CheckPremise checks stream_keeps_messages on the live stream.
func (s *natsSource) CheckPremise(ctx context.Context, p plan.Premise) error {
	if p.Kind != plan.PremiseStreamKeepsMessages {
		return fmt.Errorf("the nats source cannot check a %s premise", p.Kind)
	}
	if s.core {
		return fmt.Errorf("a core NATS subscription reads no stream")
	}
	nc, err := natsgo.Connect(s.url, natsgo.Name("mqb route "+s.route+" (stream check)"), natsgo.Timeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("connect to %s: %s", plan.RedactURLs(s.url), plan.RedactURLs(err.Error()))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	name, err := s.streamName(qctx, js)
	if err != nil {
		return err
	}
	st, err := js.Stream(qctx, name)
	if err != nil {
		return fmt.Errorf("stream %s: %w", name, err)
	}
	info, err := st.Info(qctx)
	if err != nil {
		return fmt.Errorf("stream %s: read its configuration: %s", name, plan.RedactURLs(err.Error()))
	}
	if why := streamRemoves(info.Config); len(why) > 0 {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("stream %s %s, so a message can leave the stream before the route has committed it", name, strings.Join(why, ", ")),
			Fix: fmt.Sprintf("let the stream keep its messages (nats stream edit %s --max-age=0, or --discard=new with count and size limits, "+
				"--discard-per-subject with max_msgs_per_subject), or set stream_limits = accept on the source and take the route as at-most-once", name),
		}
	}
	return nil
}

// streamRemoves lists what in a stream's configuration can remove a
// message no consumer has acknowledged; none when the stream keeps them.
func streamRemoves(c jetstream.StreamConfig) []string {
	var why []string
	if c.MaxAge > 0 {
		why = append(why, fmt.Sprintf("removes messages older than max_age %s", c.MaxAge))
	}
	if c.AllowMsgTTL {
		why = append(why, "lets publishers give messages a TTL (allow_msg_ttl)")
	}
	if c.AllowRollup {
		why = append(why, "lets publishers roll a subject up, removing its earlier messages (allow_rollup_hdrs)")
	}
	if c.Discard != jetstream.DiscardNew {
		if c.MaxMsgs > 0 {
			why = append(why, fmt.Sprintf("discards its oldest message past max_msgs %d", c.MaxMsgs))
		}
		if c.MaxBytes > 0 {
			why = append(why, fmt.Sprintf("discards its oldest messages past max_bytes %d", c.MaxBytes))
		}
	}
	if c.MaxMsgsPerSubject > 0 && (c.Discard != jetstream.DiscardNew || !c.DiscardNewPerSubject) {
		why = append(why, fmt.Sprintf("discards a subject's oldest message past max_msgs_per_subject %d", c.MaxMsgsPerSubject))
	}
	return why
}
