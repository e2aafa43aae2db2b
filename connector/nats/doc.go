// Package nats is the nats source and sink. As a source, a JetStream
// durable pull consumer with explicit acks, acking a message only once
// the route has committed past it (or a core NATS subscription, at most
// once); as a sink, JetStream publishes carrying Nats-Msg-Id =
// message_id, so the stream's duplicate window absorbs a retried write
// (or core NATS publishes, flushed). The source can tell a
// producer-stamped id from a minted one, for the producer-id premise.
//
// At start the source compares the stream's first sequence with the last
// one its consumer was delivered: messages the stream's limits or a purge
// removed before the consumer was delivered them stop the route, naming
// them, when the consumer's filter covers every subject of the stream and
// the stream denies deletes (else a deliberate delete cannot be told from
// a loss, and the source warns). See removedcheck.go for what is and is
// not decidable. Before that, the stream_keeps_messages premise refuses a
// stream whose configuration lets it remove a message the route has not
// committed (premise_stream.go), unless stream_limits = accept.
//
// It registers the "nats" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package nats
