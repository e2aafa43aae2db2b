// Package amqp is the amqp source and sink, over AMQP 0-9-1 (RabbitMQ).
// As a source, a consumer of one queue with manual acks and a prefetch
// window, acking a message only once the route has committed past it, so
// the broker redelivers whatever a crash or a lost connection left
// unacked (at-least-once by redelivery). A lost connection is made again
// with backoff until the route stops; a broker back up that answers
// NOT_FOUND for the queue (RabbitMQ does while it recovers its durable
// queues) is given 15 s before the route fails naming the queue. As a
// sink, persistent, mandatory publishes under publisher confirms, each
// message carrying message_id as its message_id property and
// mq_bridge.message_id header; a message returned unroutable refuses its
// record (the DLQ gets it), except in the 15 s after the sink connected
// again, when it fails the write retryably (the broker may be recovering
// the queue). The source can tell a producer-stamped id from a minted
// one, for the producer-id premise.
//
// It registers the "amqp" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package amqp
