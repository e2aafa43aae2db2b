// Package objectstore is the object_store source and sink, over a Google
// Cloud Storage bucket prefix (gs://, the JSON API over net/http), an S3
// bucket prefix on AWS or an S3-compatible server (s3://, the AWS SDK's
// S3 client), or a local directory (file://), the store reached through
// one small interface (store.go). The sink writes whole immutable
// objects, each put carrying a does-not-exist precondition: named by a UUIDv7 under name_by = write_time, or, under
// name_by = source_position, named for the run of element positions each
// holds (source positions, and an element's index where a part starts or
// ends inside the elements an unnest made of a record), so that a replay, recognised from one listing of the prefix,
// writes nothing twice. The source reads every object under the prefix
// in key order, one record per line (gzip and zstd objects decompressed),
// checkpointing the object and line it reached; with poll_interval it
// keeps listing. An s3:// sink under source_position checks at start-up
// that the server honours the precondition (premise.go).
//
// It registers the "object_store" kind with the runtime in init; a binary
// that runs plans links it with a blank import, as connector/all does.
package objectstore
