// Package kafka is the kafka source and sink, speaking the Kafka protocol
// through kafka-go (imported as kafkago). The source reads every
// partition of a topic, keeping each partition's next offset in the
// checkpoint store, or, with group_id, as a member of a consumer group
// that commits the contiguous acked offset of each partition it holds
// and nothing past it, through rebalances. The sink produces each write
// with one Produce request per partition chunk, acked by all in-sync
// replicas. Both ends share the TLS and SASL settings (security.go).
//
// It registers the "kafka" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package kafka
