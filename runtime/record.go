package runtime

import (
	"crypto/rand"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Record is one unit moving through a route.
type Record struct {
	// Payload is the record as read (one line, without its newline), or as
	// re-encoded after a map step changed it.
	Payload []byte
	// Meta is the string metadata; nil until a step sets a key.
	Meta map[string]string
	// Seq is the source position within its partition: for a file, the
	// record's index; for Kafka, its offset.
	Seq uint64
	// Next is the source offset just after the record (a file's byte
	// offset of the next line).
	Next int64
	// Partition is the source partition the record was read from (a
	// Kafka partition; 0 for a source that has one).
	Partition int32

	// The fields below are ordered so that the small ones share words: a
	// batch holds its records in one array, and at 200 bytes rather than
	// 224 a batch of 4096 touches 24 fewer pages of fresh memory.

	gen uint32 // generation of the partition's assignment it was read under

	// kid and kids: the record is element kid of the kids records an
	// unnest made of the one read at Seq, which is acked once all kids
	// are (kids 0: the record read).
	kid, kids uint32

	hasMsgID bool
	dirty    bool // value changed by map: re-encode before writing
	hasID    bool // see id
	state    recState

	msgID uuid.UUID

	value any // decoded payload (nil until decoded, or when not needed)
	// slots, when set, hold the payload's fields the route reads, in
	// slotTab's order, instead of value (slots.go); payload() builds value.
	slots   []any
	slotTab *payloadSlots

	// id is meta["mqb.id"] while hasID, set on a record whose Meta was
	// nil and kept out of a map until something reads Meta (metaid.go):
	// then Meta is nil.
	id string
	// idValue is id boxed as the id expression's value was (a decoded
	// string field), so a program reading meta["mqb.id"] returns it
	// without boxing id again; nil when it was not one (metaid.go).
	idValue any

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
		r.msgID, r.hasMsgID = freshIDs.mint(time.Now().UnixMilli()), true
	}
	return r.msgID
}

// freshIDs mints the message ids of records read without one.
var freshIDs idMinter

// idMinter mints UUIDv7 ids (RFC 9562) by the RFC's "monotonic random"
// method (section 6.2, method 2): the 48-bit millisecond timestamp, then
// rand_a and rand_b read as one 74-bit counter, drawn from crypto/rand at
// each new millisecond (its top bit left clear, so it cannot run out) and
// incremented by one for each further id in that millisecond.
//
// These ids are per-delivery: no verdict relies on one being the same on
// a replay. What the engine and the systems downstream rely on is that
// two deliveries never share one: a sink stamps it (JetStream and a
// downstream mqb deduplicate on the stamp), unnest derives its parts' ids
// from it. The ids of one process are strictly increasing, so never
// equal; two processes' collide only when both mint in one millisecond
// from seeds within their counts of each other, a chance of about
// (n1+n2)/2^73 for n1 and n2 ids, below the n1*n2/2^74 of drawing 74
// random bits per id (uuid.NewV7). It costs a clock read and a locked
// increment per id (MintMessageIDs: per write) where NewV7 took a clock
// read, two locks and a sixteenth of a getrandom call per id: a tenth of
// the CPU of a file to Kafka route.
type idMinter struct {
	mu sync.Mutex
	ms int64  // timestamp of the last id (at least the clock's, never less than before)
	hi uint16 // the counter's top 12 bits (rand_a)
	lo uint64 // its low 62 bits (rand_b)
}

// mint returns the next id at the clock reading now (Unix milliseconds).
func (g *idMinter) mint(now int64) uuid.UUID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.step(now)
	return g.id()
}

// MintMessageIDs gives each record of recs that has no message id yet
// (MessageID) its fresh one now, all at one clock reading and under one
// lock: a sink that stamps every record's id calls it once per write
// rather than paying a clock read per record.
func MintMessageIDs(recs []*Record) {
	first := slices.IndexFunc(recs, func(r *Record) bool { return !r.hasMsgID })
	if first < 0 {
		return
	}
	now := time.Now().UnixMilli()
	freshIDs.mu.Lock()
	defer freshIDs.mu.Unlock()
	for _, r := range recs[first:] {
		if !r.hasMsgID {
			freshIDs.step(now)
			r.msgID, r.hasMsgID = freshIDs.id(), true
		}
	}
}

// step moves g to the next id at the clock reading now. A clock that
// steps back keeps the last timestamp and counts on. g.mu is held.
func (g *idMinter) step(now int64) {
	switch {
	case now > g.ms:
		g.ms = now
		g.seed()
	case g.lo < 1<<62-1:
		g.lo++
	case g.hi < 1<<12-1:
		g.hi, g.lo = g.hi+1, 0
	default: // the counter ran out: on to the next millisecond
		g.ms++
		g.seed()
	}
}

// id is g's current id. g.mu is held.
func (g *idMinter) id() uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[0:8], uint64(g.ms)<<16|0x7000|uint64(g.hi))
	binary.BigEndian.PutUint64(id[8:16], 0x8000_0000_0000_0000|g.lo)
	return id
}

// seed draws the counter at random, its top bit clear.
func (g *idMinter) seed() {
	var b [10]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	g.hi = binary.BigEndian.Uint16(b[0:2]) & 0x07ff
	g.lo = binary.BigEndian.Uint64(b[2:10]) & (1<<62 - 1)
}

func (r *Record) setMeta(k, v string) {
	if k == metaID && (r.hasID || r.Meta == nil) {
		r.id, r.hasID, r.idValue = v, true, nil
		return
	}
	r.flushMeta()
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
