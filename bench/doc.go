// Package bench holds mqb's performance harnesses: bench/pipeline times whole
// routes through runtime.Run, bench/sqlitedrivers compares the two SQLite
// drivers on the sink's access pattern.
package bench
