package structural

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

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
func closeSinks(ss []runtime.Sink) error {
	var errs []error
	for _, s := range ss {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// prefixRefusals names the branch in the per-record failures it marked,
// so a dead-lettered record says which branch refused it.
func prefixRefusals(recs []*runtime.Record, prefix string) {
	for _, r := range recs {
		if why := r.Refused(); why != "" && !strings.HasPrefix(why, prefix) {
			r.Refuse(prefix + ": " + why)
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
		if !runtime.IsRetryable(err) {
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
