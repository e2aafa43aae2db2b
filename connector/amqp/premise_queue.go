package amqp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// The queue_keeps_messages premise. The source reads what the queue
// holds, so a message the broker itself drops or dead-letters before the
// route reads it (a message TTL, a queue expiry, a length limit that drops
// from the head, a delivery limit; a transient or auto-delete queue) is
// never read, and nothing says so. Before the first record the source
// learns the queue's flags and arguments and accepts only those known to
// keep every message (an allow-list).
//
// AMQP 0-9-1 has no request that lists a queue's arguments, but a
// declaration that differs from the queue is refused (406
// PRECONDITION_FAILED) naming the first flag or argument that differs and
// the queue's value of it ("inequivalent arg 'x-message-ttl' … received
// none but current is the value '60000' of type 'signedint'"). So the
// source declares the queue as it believes it is, learns from each
// refusal, and declares again until the broker accepts: then what it
// declared is the queue. It first makes sure the queue exists (a passive
// declaration), so the probe never creates one. A policy's arguments are
// not part of the declaration and cannot be seen by a client.

// PremiseNode is the plan node the source was built from.
func (s *source) PremiseNode() string { return s.node }

// CheckPremise checks queue_keeps_messages on the live queue.
func (s *source) CheckPremise(ctx context.Context, p plan.Premise) error {
	if p.Kind != plan.PremiseQueueKeepsMessages {
		return fmt.Errorf("the amqp source cannot check a %s premise", p.Kind)
	}
	q, err := s.learnQueue(ctx)
	if err != nil {
		return fmt.Errorf("route %s: amqp source: read the flags and arguments of queue %s: %w", s.route, s.queue, err)
	}
	if why := q.drops(); why != "" {
		return &runtime.PremiseFailure{Found: fmt.Sprintf("queue %s %s, so a message can leave the queue without the route reading it", s.queue, why),
			Fix: "RabbitMQ cannot change a queue's arguments: declare a durable queue without them, bind it as " + s.queue + " is bound, and point the route at it (x-max-length with x-overflow = reject-publish is kept: it refuses the publish instead)"}
	}
	return nil
}

// queueShape is what a queue declaration says: flags and arguments; and
// the broker's version, which gives some arguments their defaults.
type queueShape struct {
	durable, autoDelete bool
	args                amqp.Table
	version             string // the server's "version" property, as RabbitMQ says it
}

// inequivalentRE reads a 406 refusal of a declaration.
var inequivalentRE = lazyre.New(`inequivalent arg '([^']+)' for queue .*: received .* but current is (none|the value '(.*)' of type '([a-z]+)'|'([a-z]+)')$`)

// learnQueue declares the queue until the broker accepts the declaration,
// learning a flag or argument from each refusal.
func (s *source) learnQueue(ctx context.Context) (queueShape, error) {
	q := queueShape{durable: true, args: amqp.Table{}}
	conn, ch, err := dial(s.url, "mqb route "+s.route+" (queue check)")
	if err != nil {
		return q, err
	}
	defer conn.Close()
	if _, err := ch.QueueDeclarePassive(s.queue, true, false, false, false, nil); err != nil {
		return q, err
	}
	q.version, _ = conn.Properties["version"].(string)
	for range 32 {
		if ctx.Err() != nil {
			return q, ctx.Err()
		}
		if ch == nil || ch.IsClosed() {
			if ch, err = conn.Channel(); err != nil {
				return q, err
			}
		}
		_, err := ch.QueueDeclare(s.queue, q.durable, q.autoDelete, false, false, q.args)
		if err == nil {
			return q, nil
		}
		var ae *amqp.Error
		if !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
			return q, err
		}
		m := inequivalentRE().FindStringSubmatch(ae.Reason)
		if m == nil {
			return q, fmt.Errorf("cannot read the broker's refusal %q", ae.Reason)
		}
		name := m[1]
		switch {
		case name == "durable" || name == "auto_delete":
			v := m[5] == "true"
			if name == "durable" {
				q.durable = v
			} else {
				q.autoDelete = v
			}
		case m[2] == "none":
			delete(q.args, name)
		default:
			v, err := tableValue(m[3], m[4])
			if err != nil {
				return q, fmt.Errorf("argument %s: %w", name, err)
			}
			q.args[name] = v
		}
		ch = nil // a refusal closes the channel
	}
	return q, fmt.Errorf("the broker kept refusing the declaration (last: %v)", err)
}

// tableValue is an argument's value as the broker names its type.
func tableValue(v, typ string) (any, error) {
	switch typ {
	case "longstr":
		return v, nil
	case "signedint":
		n, err := strconv.ParseInt(v, 10, 32)
		return int32(n), err
	case "long":
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err
	case "short":
		n, err := strconv.ParseInt(v, 10, 16)
		return int16(n), err
	case "byte":
		n, err := strconv.ParseInt(v, 10, 8)
		return int8(n), err
	case "bool":
		return v == "true", nil
	}
	return nil, fmt.Errorf("value %q of type %s is not one this check reads", v, typ)
}

// keptArgs are the queue arguments known to drop no message: a priority,
// the queue type, where dead letters go (a message is dead-lettered only
// by an argument refused below, or a reject, which the source never
// sends), single active consumer, storage and placement.
var keptArgs = []string{
	"x-max-priority", "x-dead-letter-exchange", "x-dead-letter-routing-key", "x-dead-letter-strategy",
	"x-single-active-consumer", "x-queue-mode", "x-queue-version", "x-queue-master-locator", "x-queue-leader-locator",
	"x-quorum-initial-group-size", "x-quorum-target-group-size", "x-max-in-memory-length", "x-max-in-memory-bytes",
}

// drops says how the queue can lose a message the route has not read,
// "" when its flags and arguments keep every one.
func (q queueShape) drops() string {
	var why []string
	if !q.durable {
		why = append(why, "is not durable (a broker restart loses it and its messages)")
	}
	if q.autoDelete {
		why = append(why, "is auto-delete (the broker deletes it, with its messages, when the route's consumer goes)")
	}
	overflow, _ := q.args["x-overflow"].(string)
	overflowSaid := overflow
	if overflow == "" {
		overflowSaid = "drop-head, the default"
	}
	names := make([]string, 0, len(q.args))
	for k := range q.args {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		v := q.args[k]
		switch {
		case slices.Contains(keptArgs, k):
		case k == "x-queue-type" && (v == "classic" || v == "quorum"):
		case k == "x-overflow":
		case (k == "x-max-length" || k == "x-max-length-bytes") && strings.HasPrefix(overflow, "reject-publish"):
		case k == "x-max-length" || k == "x-max-length-bytes":
			why = append(why, fmt.Sprintf("has %s = %v with x-overflow %s (the broker drops or dead-letters the oldest message when it is full)", k, v, overflowSaid))
		case k == "x-message-ttl":
			why = append(why, fmt.Sprintf("has x-message-ttl = %v ms (a message older than that is dropped or dead-lettered)", v))
		case k == "x-expires":
			why = append(why, fmt.Sprintf("has x-expires = %v ms (the queue is deleted, with its messages, when unused that long)", v))
		case k == "x-delivery-limit" && negative(v):
			// -1: no limit (RabbitMQ 4 takes it so; quorum queues
			// there have a limit of 20 otherwise).
		case k == "x-delivery-limit":
			why = append(why, fmt.Sprintf("has x-delivery-limit = %v (a message delivered more often, as one is when the route stops before acking it, is dropped or dead-lettered)", v))
		default:
			why = append(why, fmt.Sprintf("has argument %s = %v, which this check does not know to keep every message", k, v))
		}
	}
	if _, set := q.args["x-delivery-limit"]; !set && q.args["x-queue-type"] == "quorum" && majorVersion(q.version) >= 4 {
		why = append(why, fmt.Sprintf("is a quorum queue on RabbitMQ %s, which gives it a delivery limit of 20 when x-delivery-limit is not set (a message delivered more often, as one is when the route stops before acking it again and again, is dropped or dead-lettered); declare it with x-delivery-limit = -1", q.version))
	}
	return strings.Join(why, "; ")
}

// negative says whether an argument's value is a number below 0.
func negative(v any) bool {
	switch n := v.(type) {
	case int8:
		return n < 0
	case int16:
		return n < 0
	case int32:
		return n < 0
	case int64:
		return n < 0
	}
	return false
}

// majorVersion is the major number of a version such as "4.0.5" (0 when
// it does not read as one).
func majorVersion(v string) int {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	if err != nil {
		return 0
	}
	return n
}
