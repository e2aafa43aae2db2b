// Package kafka is the kafka source and sink, speaking the Kafka protocol
// through kafka-go (imported as kafkago). The source reads every
// partition of a topic, keeping each partition's next offset in the
// checkpoint store, or, with group_id, as a member of a consumer group
// that commits the contiguous acked offset of each partition it holds
// and nothing past it, through rebalances. The sink hands each write's
// records to one lane per partition, which produces them in order, one
// request out at a time, acked by all in-sync replicas, while the write
// builds the rest; it encodes each request's record batch itself
// (recordbatch.go) and picks each record's partition itself: by key
// (partition_key) where kafka-go's Hash balancer and sarama's producers
// put it, keyless records round-robin. Both ends share the TLS and SASL settings (security.go).
//
// It registers the "kafka" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package kafka
