// Package sql is the sql source and the sql sink.
//
// The sink writes each record with the route's insert_query into SQLite
// (sqlite://), PostgreSQL (postgres://) or MySQL/MariaDB (mysql://), one
// transaction per batch, a row the database refuses dead-lettered alone
// (sink.go, sink_server.go; pgstage.go sends a PostgreSQL batch as one
// statement over parameter arrays, pgcopy.go and pgbinary.go load a
// bulk_copy batch by binary COPY). On a route without a dedup step a
// bulk_copy sink keeps one transaction open and commits it at the route's
// commit instead of once per batch (pgcommit.go, runtime.CommitSyncSink):
// its rows become visible at the commit, at most a commit interval after
// their write, and losing that transaction (a server restart) stops the
// route, whose rerun writes those rows again. Before the first record it
// checks the premises the compiler's
// proof rests on — the unique index a conflict clause names, the columns
// a replace keeps stable (premise.go) — and that a key column stores its
// values as they are (columnfit.go). A SQLite sink keeps nothing of a
// record once its batch is written (SQLite copies each bound value, and
// the sink clears its own), and says so (runtime.ReleasingSink): the
// engine then reuses the memory of a route's acked batches.
//
// The source pages a table or query by a unique integer cursor column,
// which is its position. Reading and writing one database at concurrency
// 1, the two commit the cursor in the sink's own transaction
// (outbox.go, through runtime.OutboxSink), in a row of mqb_outbox keyed
// by the route, its source and its target table; that table must roll back
// with it (an InnoDB table, not MyISAM: a premise checked at start-up).
//
// It registers the "sql" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does. The
// package is named after the kind, so it imports database/sql as dbsql.
package sql
