// Package runtime executes a compiled plan: every route becomes a pipeline
// source → steps (in node order) → sink, moving records in bounded batches.
// A record is acked only after the output chain (sink, or dead-letter queue)
// reports success; the source commits only the highest contiguous acked
// position, so a crash replays and never skips. Dedup state and checkpoints
// live in Pebble. Run is the entry point; `mqbc run` wires it to the CLI.
package runtime
