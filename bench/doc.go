// Package bench holds mqb's performance harnesses: bench/pipeline times whole
// routes through runtime.Run, bench/compare times the mqbc binary against
// cat, a Python loop, psql's \copy and Benthos as whole processes on the
// same input, bench/kafka against kcat, and bench/sqlitedrivers compares
// the two SQLite drivers on the sink's access pattern.
package bench
