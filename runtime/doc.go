// Package runtime executes a compiled plan: every route becomes a pipeline
// source → steps (in node order) → sink, moving records in bounded batches.
// A record is acked only after the output chain (sink, or dead-letter queue)
// reports success; the source commits only the highest contiguous acked
// position, so a crash replays and never skips. Dedup state and checkpoints
// live in Pebble. Run is the entry point; `mqbc run` wires it to the CLI.
//
// The package is the engine, and still holds the file, stdin, stdout and
// sql connectors as a file per end. Connectors outside it
// (connector/http, connector/mongodb, connector/clickhouse,
// connector/nats, connector/kafka, connector/postgrescdc,
// connector/objectstore, connector/structural) build on the connector API
// in connector.go — RegisterSink, RegisterSource, BuildEnv, Sink, Source,
// Batch, Record's source- and sink-side methods, Program, Template, the
// premise and guarantee hooks, part naming by source position,
// BuildBranch and BranchingSink for a sink made of sinks — and register
// their kinds in init, so a program that runs plans links them with a
// blank import of connector/all. docs/connectors.md describes how to
// write one.
package runtime
