package runtime

import "fmt"

// PremiseProducerID: a route whose proof rests on ids its producers stamp
// (a dedup keyed on message_id over NATS or Kafka) dead-letters a record
// that carries none, instead of letting an id minted per read (or derived
// from the offset) stand in for it. The sources that can tell a stamped
// id (connector/nats, connector/kafka) implement ProducerIDSource and
// dead-letter with this reason (MissingProducerID).

func missingProducerID(header, reason string) string {
	return fmt.Sprintf("the record has no producer-stamped id (%s): an id minted for this read would let a redelivery through as a new record (the verdict rests on it: %s)", header, reason)
}
