// Package redis is the redis source and sink: a Redis stream.
//
// As a source it reads the stream through a consumer group (XREADGROUP)
// and acknowledges an entry (XACK) only once the route has committed past
// it. The entries a consumer read and did not acknowledge stay in the
// group's pending list: on start the source claims those of other
// consumers idle for claim_idle (XAUTOCLAIM) and reads its own pending
// entries again before new ones, so an entry in flight at a crash is
// delivered again, never lost. Its position is the entry id, which is the
// same on every re-read (the source is replayable), and an entry's
// message_id is its mq_bridge.message_id field or else derived from the
// stream and the entry id.
//
// A stream trimmed (XTRIM, or XADD with MAXLEN or MINID) past entries the
// group had not been delivered yet loses them, and XREADGROUP would go
// on from the first entry left without a word. The source reads new
// entries through a script that first compares the stream's counters
// (entries-added, length) with the group's (entries-read): when entries
// were certainly trimmed before the group read them it reads nothing and
// stops the route, naming them and the XGROUP SETID that goes on past
// them; when the stream has had entries deleted with XDEL, which the
// counters do not tell from trimmed ones, it warns and reads on. An
// entry the producer deletes with XDEL is not counted as lost. See
// trimcheck.go.
//
// As a sink it appends each record with XADD (pipelined per batch),
// carrying the payload, mq_bridge.message_id = message_id and the
// forwarded meta entries as fields. A stream cannot refuse a repeat: a
// replay appends again (at-least-once).
//
// It registers the "redis" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package redis
