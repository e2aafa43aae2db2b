// Package stdio is the stdin source and the stdout sink: the process's
// standard input read one record per line, and its standard output
// written one line per record (the DLQ envelope as a DLQ's target).
//
// A pipe cannot be read again, so the stdin source keeps no checkpoint
// and names no parts: the compiler calls a route over it at-most-once.
// The two share nothing but the line encoding, which the engine exports
// (runtime.AppendLines, runtime.Snippet) for every sink and source that
// writes or reads lines; they are one package because they are one
// thing to a user, the process's streams, and each is a page long.
//
// It registers the "stdin" and "stdout" kinds with the runtime in init; a
// binary that runs plans links it with a blank import, as connector/all
// does.
package stdio
