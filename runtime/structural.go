package runtime

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// Structural outputs — switch, request, fanout — are sinks made of sinks:
// each branch of the plan node is built as a full sink (recursively, so a
// branch may itself be structural, or a named endpoint the compiler inlined
// with Node.Ref set) and the structural sink hands it the records that go
// its way. The records are the route's own: a branch marks per-record
// failures in rec.sinkErr and tags meta (sql.outcome) in place, so both flow
// back to the route's deliver, which dead-letters and acks as for any sink.
//
// A whole-batch failure of any branch fails the structural write, which the
// route's retry step then repeats in full: every branch sees the batch's
// records again, including the ones it already wrote. That is safe for the
// branches the compiler proves effectively-once (key-addressed or positional
// writes absorb the repeat); a route is only proven so when every branch is.

// structuralSink is a sink with branches.
type structuralSink interface {
	sink
	branches() []sink
}

// buildBranch builds one branch's endpoint, as a DLQ's target when the
// structural output is one. A part-file sink inside a branch
// is not the route's sink: it skips positions it already covers on its own
// (partSink.Write), but the route must not drop such records before the
// other branches see them, so rt.parts keeps what it was.
func (b *buildEnv) buildBranch(n *plan.Node) (sink, []*program, error) {
	rt := b.rt
	saved := rt.parts
	defer func() { rt.parts = saved }()
	return rt.buildSink(b.ctx, nodeAttrs{route: rt.name, node: n}, b.c, b.o, b.dlq)
}

// branchName names a branch in errors and logs: `case "x"`, `default`,
// `call`, `forward`, `to #2`, with the named endpoint it came from.
func branchName(b plan.Branch, index int) string {
	var s string
	switch b.Label {
	case plan.BranchCase:
		s = fmt.Sprintf("case %q", b.Match)
	case plan.BranchTo:
		s = fmt.Sprintf("to #%d", index+1)
	default:
		s = b.Label
	}
	s += " (" + b.Node.Kind
	if b.Node.Ref != "" {
		s += " ref " + b.Node.Ref
	}
	return s + ")"
}

// closeSinks closes every built branch.
func closeSinks(ss []sink) error {
	var errs []error
	for _, s := range ss {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// verifyBranches runs the start-up guarantee check of every branch that has
// one (a ClickHouse table's engine, say).
func verifyBranches(ss []sink, guarantee string) error {
	for _, s := range ss {
		if v, ok := s.(GuaranteeVerifier); ok {
			if err := v.VerifyGuarantee(guarantee); err != nil {
				return err
			}
		}
	}
	return nil
}

// prefixRecordErrors names the branch in the per-record failures it marked,
// so a dead-lettered record says which branch refused it.
func prefixRecordErrors(recs []*Record, prefix string) {
	for _, r := range recs {
		if r.sinkErr != "" && !strings.HasPrefix(r.sinkErr, prefix) {
			r.sinkErr = prefix + ": " + r.sinkErr
		}
	}
}

// branchErrors is the whole-batch failure of one or more branches. It is
// retryable only when every failing branch's error is: retrying cannot fix
// a branch that failed for good, so then only the permanent errors are
// exposed to errors.As.
type branchErrors struct {
	errs []error
}

func (e *branchErrors) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e *branchErrors) Unwrap() []error {
	var permanent []error
	for _, err := range e.errs {
		if !isRetryable(err) {
			permanent = append(permanent, err)
		}
	}
	if len(permanent) > 0 {
		return permanent
	}
	return e.errs
}

func joinBranchErrors(errs []error) error {
	var nonNil []error
	for _, err := range errs {
		if err != nil {
			nonNil = append(nonNil, err)
		}
	}
	switch len(nonNil) {
	case 0:
		return nil
	case 1:
		return nonNil[0]
	}
	return &branchErrors{errs: nonNil}
}

// unmatchedDropped sums the records every switch in the sink tree dropped
// for want of a matching case and a default.
func unmatchedDropped(s sink) int64 {
	var n int64
	if sw, ok := s.(*switchSink); ok {
		n += sw.unmatched.Load()
	}
	if st, ok := s.(structuralSink); ok {
		for _, b := range st.branches() {
			n += unmatchedDropped(b)
		}
	}
	return n
}
