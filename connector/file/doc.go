// Package file is the file source and the file sink.
//
// The source reads one record per line, in consume mode (the file once,
// to its end, resuming after the last committed record) or following it
// (subscribe, group_subscribe: lines appended, rotations, truncations).
// Its checkpoint names the file, not only the path (ident.go), so a path
// given another file is never resumed at a byte offset into other
// content.
//
// The sink appends one line per record and fsyncs once per batch
// (name_by = write_time), cutting on reopen only a torn line it wrote
// itself; or, with name_by = source_position, writes immutable part files
// named for the element positions they cover (source positions, with an
// element's index where a part starts or ends inside the elements an
// unnest made of a record), so a replay skips what an earlier run wrote
// (the part naming is the engine's, shared with the object_store sink:
// runtime.PositionRuns, runtime.SpanOf, runtime.PartitionRanges).
//
// It registers the "file" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package file
