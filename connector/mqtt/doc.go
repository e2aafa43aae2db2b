// Package mqtt is the mqtt source and sink, over MQTT 5 with
// github.com/eclipse/paho.golang (MQTT 5 for its user properties, which
// carry a record's message_id, and its manual acknowledgements). As a
// source, a QoS 1 subscription in a persistent session whose PUBACKs are
// sent only once the route has committed past a message (or QoS 0, at
// most once); as a sink, QoS 1 publishes that wait for their PUBACK.
//
// Both ends ride through a lost connection. The source connects again
// with the same client_id and clean start off, backing off from 100 ms to
// 5 s, until the route stops; each message read carries the generation of
// the connection it came in on, and its PUBACK is sent on that connection
// only: those owed on a lost one are dropped, the broker sends the
// messages again on the resumed session, and the route gets them again
// (the sink's key, or a producer-stamped message_id under a dedup step,
// absorbs the repeat, as after a crash). The sink connects again at its
// next write: a retry step before it carries the route over the outage.
//
// That the broker keeps the session while the route is away is a premise
// of every QoS 1 source's plan (plan.PremiseSessionKept, checked on every
// connection). A broker that no longer has it (CONNACK session present =
// false: restarted without persistence, session_expiry passed, the
// client_id taken with a clean start) has lost the messages it held for
// the route. On a reconnect, or at a start after the route has committed
// from the session before (the source has the route save a checkpoint,
// holding no position, once a run, to know that), the source ends the
// empty session its connection made, so that every later start refuses
// too, and stops the route with an error naming the premise, the
// client_id and the broker; nothing uncommitted was acknowledged. A first
// start (no checkpoint) creates the session. An operator goes on
// knowingly by resetting the route's state (mqbc state reset: the next
// start is a first start) or with on_session_lost = resubscribe, under
// which the source subscribes again with a warning, the plan carries no
// such premise and the verdict is at-most-once.
//
// It registers the "mqtt" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package mqtt
