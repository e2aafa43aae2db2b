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
// absorbs the repeat, as after a crash). A broker that no longer has the
// session (session present = false) gets the subscription again, with a
// warning that what it held for the old session may be lost. The sink
// connects again at its next write: a retry step before it carries the
// route over the outage.
//
// It registers the "mqtt" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package mqtt
