// Package postgrescdc is the postgres_cdc source: a publication's row
// changes streamed through a logical replication slot with the pgoutput
// plugin, each insert, update and delete a record whose message_id is a
// hash of its table, key and commit LSN, so a replayed change keeps its
// id. The slot holds the durable position (confirmed up to the last
// transaction whose records are all acked, and advanced on a graceful
// stop); checkpoint_store adds a second one (see pgCDCSource). With
// snapshot = true it first reads every published table in the slot's
// exported snapshot, in primary key order (snapshot.go), each row a record
// whose message_id is a UUIDv5 of the slot, table and key.
//
// The role in url need not be a superuser: one with LOGIN and REPLICATION
// and SELECT on the published tables, as PostgreSQL's logical replication
// asks, runs it, snapshot included, if the publication already exists
// (creating a missing one FOR ALL TABLES takes a superuser).
//
// The source rides through an outage of the server (a restart, a crash,
// a cut connection): it reconnects with a backoff (100 ms doubling to
// 5 s, for as long as the route runs). While changes stream, it starts
// replication again at the LSN the route committed, never at what it had
// only handed over; the transactions the slot then replays that this run
// had handed over already are dropped whole, so nothing is handed over
// twice in one run, and the slot is never confirmed past what the route
// committed. While the snapshot is read, it does what a rerun does: the
// snapshot's transaction ended with its connection, so it reads the rest
// in a new snapshot after the last committed row (rows handed over and
// not committed are read again, under the same message_ids), then streams
// from the slot's start. A connection that stays open and silent (a
// network partition, a frozen walsender) is lost too: after 10 s without
// a message the source asks the server for a keepalive with each status
// update, and after 30 s without one it reconnects. An answer a retry
// cannot heal (the slot or the publication gone, the slot invalidated,
// authentication refused, permission denied, the database gone) stops
// the route with an error naming the slot. So does losing a temporary
// slot's connection (the slot, and the changes since, end with it): a
// rerun resumes from the checkpoint (see pgCDCSource).
//
// It registers the "postgres_cdc" kind with the runtime in init; a binary
// that runs plans links it with a blank import, as connector/all does.
package postgrescdc
