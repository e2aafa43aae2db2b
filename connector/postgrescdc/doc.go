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
// It registers the "postgres_cdc" kind with the runtime in init; a binary
// that runs plans links it with a blank import, as connector/all does.
package postgrescdc
