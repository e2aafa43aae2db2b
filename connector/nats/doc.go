// Package nats is the nats source and sink. As a source, a JetStream
// durable pull consumer with explicit acks, acking a message only once
// the route has committed past it (or a core NATS subscription, at most
// once); as a sink, JetStream publishes carrying Nats-Msg-Id =
// message_id, so the stream's duplicate window absorbs a retried write
// (or core NATS publishes, flushed). The source can tell a
// producer-stamped id from a minted one, for the producer-id premise.
//
// It registers the "nats" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package nats
