// Package chaos checks mqb's delivery promise the way users break it: for
// every source × sink pair the runtime supports, it runs the real mqbc
// binary on generated data with duplicates, SIGKILLs it at seeded random
// instants, lets a last run finish, reads the sink back and counts lost and
// duplicated records. Effectively-once routes must hold each record exactly
// once; at-least-once routes must lose nothing.
//
// The tests are behind the chaos build tag (they take minutes and start
// every test server):
//
//	go test -tags chaos -count=1 -v ./chaos
//
// CHAOS_KILLS (default 20) sets the SIGKILLs per pair, CHAOS_SEED the seed,
// CHAOS_PAIRS a regexp selecting pairs, and CHAOS_MATRIX a file the matrix
// is written to as a Markdown table (.ci/extra.d/chaos.sh runs it).
package chaos
