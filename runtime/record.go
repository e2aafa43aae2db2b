package runtime

import (
	"github.com/google/uuid"
)

// Fresh message ids draw their random bits from uuid's pool (refilled from
// crypto/rand 256 bytes at a time) instead of a getrandom call each: a
// file source mints one per record. Enabled before any goroutine runs, as
// the library requires.
func init() { uuid.EnableRandPool() }

// Record is one unit moving through a route.
type Record struct {
	// Payload is the record as read (one line, without its newline), or as
	// re-encoded after a map step changed it.
	Payload []byte
	// Meta is the string metadata; nil until a step sets a key.
	Meta map[string]string
	// Partition is the source partition the record was read from (a
	// Kafka partition; 0 for a source that has one).
	Partition int32
	// Seq is the source position within its partition: for a file, the
	// record's index; for Kafka, its offset.
	Seq uint64
	// Next is the source offset just after the record (a file's byte
	// offset of the next line).
	Next int64

	msgID    uuid.UUID
	hasMsgID bool

	gen uint32 // generation of the partition's assignment it was read under

	// kid and kids: the record is element kid of the kids records an
	// unnest made of the one read at Seq, which is acked once all kids
	// are (kids 0: the record read).
	kid, kids uint32

	value any  // decoded payload (nil until decoded, or when not needed)
	dirty bool // value changed by map: re-encode before writing

	state  recState
	reason string // why the record is dead

	sinkErr string // set by a sink when this record failed on its own
}

type recState uint8

const (
	stLive      recState = iota
	stFiltered           // dropped by filter, acked
	stDuplicate          // dropped by dedup (or covered by a part file), acked
	stDead               // failed for good: to the DLQ
)

// MessageID is the record's u128 id in UUID form: a fresh UUIDv7 per read,
// minted on first use (nothing can tell a lazily minted id from an eager one).
func (r *Record) MessageID() string {
	return r.msgIDValue().String()
}

// msgIDValue is MessageID as a value, minting it on first use.
func (r *Record) msgIDValue() uuid.UUID {
	if !r.hasMsgID {
		id, err := uuid.NewV7()
		if err != nil {
			id = uuid.New()
		}
		r.msgID, r.hasMsgID = id, true
	}
	return r.msgID
}

func (r *Record) setMeta(k, v string) {
	if r.Meta == nil {
		r.Meta = make(map[string]string, 4)
	}
	r.Meta[k] = v
}

func (r *Record) kill(reason string) {
	r.state = stDead
	r.reason = reason
}

// batch is the engine's name for Batch (connector.go).
type batch = Batch
