// Package structural is the structural outputs — switch, fanout and
// request — sinks made of sinks: each branch of the plan node is built as
// a full sink (recursively, so a branch may itself be structural, or a
// named endpoint the compiler inlined with Node.Ref set) and the
// structural sink hands it the records that go its way. The records are
// the route's own: a branch marks per-record failures with Record.Refuse
// and tags meta (sql.outcome) in place, so both flow back to the route's
// deliver, which dead-letters and acks as for any sink.
//
// A whole-batch failure of any branch fails the structural write, which
// the route's retry step then repeats in full: every branch sees the
// batch's records again, including the ones it already wrote. That is
// safe for the branches the compiler proves effectively-once
// (key-addressed or positional writes absorb the repeat); a route is only
// proven so when every branch is.
//
// The package uses nothing of the engine but its connector API:
// BuildEnv.Branches and BuildBranch build the branches, a
// runtime.BranchingSink lets the engine find the premise targets and
// guarantee checks inside them, and a runtime.UnmatchedCount counts what
// a switch without default drops. It registers the "switch", "fanout" and
// "request" kinds with the runtime in init; a binary that runs plans links
// it with a blank import, as connector/all does. A route's `handle` is
// not here: it is part of the engine (see runtime/handler.go).
package structural
