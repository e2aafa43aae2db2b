package nats

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mqb-dev/mqb/plan"
)

// Messages removed from the stream before the consumer was delivered
// them.
//
// A stream's limits (MaxMsgs, MaxBytes, MaxAge, MaxMsgsPerSubject with
// DiscardOld) remove its oldest messages whether a consumer was
// delivered them or not, and the consumer then goes on from the first
// message left. Measured on the embedded nats-server:
//
//   - after limits removed messages past the consumer's position, its
//     Delivered.Stream stays where it was, below the stream's FirstSeq-1,
//     until it is delivered the next message;
//   - a purge moves the consumer's Delivered.Stream and AckFloor.Stream
//     up to FirstSeq-1 itself, so nothing on the server shows what the
//     consumer was not delivered; messages delivered and not acked that
//     a purge removes leave the consumer's pending acks and are not
//     redelivered (the route writes them, as it had them; a route that
//     crashed before writing them lost them);
//   - messages delivered and not acked that limits remove (a run that
//     crashed holding them, a max_age that passed while the route was
//     down) leave the consumer's pending acks at once too: its AckFloor
//     moves up to FirstSeq-1 and NumAckPending down, so the next run
//     cannot see that it was owed them (measured: 3 pending of 5
//     delivered, 12 more published to a stream keeping 10: AckFloor 5,
//     nothing pending, the next fetch starts at 11);
//   - a consumer made on a stream whose first messages are gone starts
//     with Delivered.Stream = FirstSeq-1: it lost nothing;
//   - a message deleted on purpose (DeleteMsg) at the head of the stream
//     moves FirstSeq just as a limit does, and leaves no trace.
//
// So at Open the source reads the stream's state, then the consumer's
// (in that order: a consumer read first could be delivered messages
// that limits then remove, and look as if it had not been), and when
// FirstSeq > Delivered.Stream+1 the messages in between were removed
// before the consumer (any instance of it) was delivered them. They were
// all the consumer's only when its filter covers every subject of the
// stream, and they were all removed by limits or a purge (not deleted on
// purpose) only when the stream denies deletes (DenyDelete): then the
// route stops, naming them. Otherwise it warns with what it knows.
//
// Removals while the route runs are not checked: the consumer pulls
// ahead of the route, so its Delivered.Stream has moved past a gap by
// the time a check would see it, and the gaps in the stream sequences of
// the messages one instance is delivered do not tell loss from messages
// delivered to another instance of the same durable.

// checkRemoved is the check at Open: it returns the error that stops the
// route when messages the consumer had not been delivered were certainly
// removed, and warns when they may have been.
func (s *natsSource) checkRemoved(ctx context.Context, st jetstream.Stream, cons jetstream.Consumer) error {
	si, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("route %s: nats source stream %s: read its state: %s", s.route, s.stream, plan.RedactURLs(err.Error()))
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("route %s: nats source durable %s: read its state: %s", s.route, s.durable, plan.RedactURLs(err.Error()))
	}
	first, delivered := si.State.FirstSeq, ci.Delivered.Stream
	if si.State.Msgs == 0 {
		first = si.State.LastSeq + 1
	}
	if first <= delivered+1 {
		return nil
	}
	from, to, n := delivered+1, first-1, first-1-delivered
	covers := filterCovers(si.Config.Subjects, s.subject)
	if covers && si.Config.DenyDelete && !s.acceptLimits {
		return fmt.Errorf("route %s: nats source stream %s durable %s: the messages at stream sequences %d to %d (%d) were removed from the stream (its limits: max_msgs, max_bytes, max_age, max_msgs_per_subject; or a purge) before the consumer was delivered them; "+
			"the route stops rather than pass over them without a word. They cannot be read any more; to go on from sequence %d, accepting their loss, delete the durable consumer %s (nats consumer rm %s %s) and set it up again to start there (deliver_policy by_start_sequence, opt_start_seq %d), or run the route again with a new durable",
			s.route, s.stream, s.durable, from, to, n, first, s.durable, s.stream, s.durable, first)
	}
	why := "the stream allows deleting messages (deny_delete is off), so some may have been deleted on purpose"
	switch {
	case covers && si.Config.DenyDelete:
		why = "stream_limits = accept"
	case !covers:
		why = fmt.Sprintf("the consumer's filter %s covers only some of the stream's subjects (%s), so they need not have been its messages", s.subject, strings.Join(si.Config.Subjects, ", "))
	}
	s.log.Warn(fmt.Sprintf("nats source: up to %d messages (stream sequences %d to %d) were removed from the stream before the consumer was delivered them (limits, a purge, or deletes); %s: the route reads on", n, from, to, why),
		"stream", s.stream, "durable", s.durable)
	return nil
}

// filterCovers reports whether every message of a stream taking subjects
// matches filter ("" is every subject).
func filterCovers(subjects []string, filter string) bool {
	if filter == "" || filter == ">" {
		return true
	}
	if len(subjects) == 0 {
		return false // a mirror or source stream: its subjects are not known here
	}
	for _, subj := range subjects {
		if !subjectWithin(subj, filter) {
			return false
		}
	}
	return true
}

// subjectWithin reports whether every subject that subj (which may hold
// wildcards) matches is matched by filter too.
func subjectWithin(subj, filter string) bool {
	st, ft := strings.Split(subj, "."), strings.Split(filter, ".")
	for i, f := range ft {
		if f == ">" {
			return i < len(st)
		}
		if i >= len(st) || st[i] == ">" {
			return false
		}
		if f != "*" && f != st[i] {
			return false // a literal matches only the same literal
		}
	}
	return len(st) == len(ft)
}
