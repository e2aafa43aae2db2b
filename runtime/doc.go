// Package runtime is the engine that executes a compiled plan: every
// route becomes a pipeline source → steps (in node order) → sink, moving
// records in bounded batches. A record is acked only after the output
// chain (sink, or dead-letter queue) reports success; the source commits
// only the highest contiguous acked position, so a crash replays and never
// skips. Run is the entry point; `mqbc run` wires it to the CLI.
//
// The engine holds what is the same for every kind: routes, batches, the
// ack tracker, checkpoints and dedup state (runtime/checkpoint and
// runtime/dedup, a Pebble directory or a SQL server chosen by the store's
// URL), retries, the DLQ plumbing, metrics, progress, the tap, the steps
// and the handler. It names no connector kind. Connectors are packages
// under connector/ (file, stdio, sql, http, mongodb, clickhouse, nats,
// kafka, postgrescdc, objectstore, structural) that build on the connector API in
// connector.go — RegisterSink, RegisterSource, BuildEnv, Sink, Source,
// Batch, Record's source- and sink-side methods, Program, Template, the
// premise and guarantee hooks, part naming by source position,
// BuildBranch and BranchingSink for a sink made of sinks, and the
// interfaces through which the engine asks an end for more (the route's
// own sink, repeats absorbed for an elided dedup, the transactional
// outbox, what `mqbc state` shows) — and register their kinds in init, so
// a program that runs plans links them with a blank import of
// connector/all. docs/connectors.md describes how to write a connector.
package runtime
