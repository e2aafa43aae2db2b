package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// Premises are what a route's proof assumes about the world the compiler
// cannot see (plan.Premise). Before the first record, every start-up
// premise is checked against the live system through the connector of the
// node it names, and a failed one refuses the route, naming the table, the
// columns, the reason the verdict needs it and the fix. Every per-record
// premise is armed on the node that checks it, which dead-letters a record
// that breaks it with the reason.
//
// Which node kinds can check which premise is an allow-list, made of what
// each kind's registration declares (ChecksPremises, ArmsPremises,
// HoldsPremises): a premise this runtime does not know how to check
// refuses the route, since a verdict resting on an unchecked assumption
// is not a promise.

// premiseTarget, recordPremiseTarget and producerIDSource are the
// engine's names for PremiseTarget, RecordPremiseTarget and
// ProducerIDSource (connector.go): an endpoint (a sink, possibly inside a
// switch, fanout, request or handler) that checks start-up premises about
// itself, one that enforces a per-record premise on every record it
// writes, and a source that can tell a record whose producer stamped its
// id from one whose id it derived or minted.
type (
	premiseTarget       = PremiseTarget
	recordPremiseTarget = RecordPremiseTarget
	producerIDSource    = ProducerIDSource
)

// premiseFailure is the engine's name for PremiseFailure (connector.go).
type premiseFailure = PremiseFailure

// PremiseResult is the outcome of one premise, as `mqbc check` prints it.
type PremiseResult struct {
	Route   string
	Premise plan.Premise
	// OK: the start-up premise holds, or the per-record premise is armed.
	OK bool
	// Err says why not (nil when OK).
	Err error
}

// String renders the result as one line.
func (r PremiseResult) String() string {
	p := r.Premise
	if p.Kind == "" { // the route as a whole
		if r.OK {
			return fmt.Sprintf("ok     %s: no premises to check (connections opened)", r.Route)
		}
		return fmt.Sprintf("FAILED %s: %v", r.Route, r.Err)
	}
	if !r.OK {
		return fmt.Sprintf("FAILED %s: %s %s: %v", r.Route, p.When, p.Kind, r.Err)
	}
	line := fmt.Sprintf("ok     %s: %s %s: %s", r.Route, p.When, p.Kind, p.Holds)
	switch p.When {
	case plan.CheckPerRecord:
		line += " (armed: checked on every record)"
	case plan.CheckPerConnection:
		line += " (armed: checked on every connection)"
	}
	return line
}

type premiseReportKey struct{}

// premiseReport collects results instead of refusing (Check).
type premiseReport struct {
	results []PremiseResult
}

// checkPremises checks the start-up premises of pr against the live
// systems and arms its per-record premises, before any record moves. In
// a Check run it records every result and lets the build go on.
func (rt *route) checkPremises(ctx context.Context, pr *plan.Route) error {
	report, _ := ctx.Value(premiseReportKey{}).(*premiseReport)
	var errs []error
	for _, p := range pr.Premises {
		err := rt.checkPremise(ctx, pr, p)
		if report != nil {
			report.results = append(report.results, PremiseResult{Route: pr.Name, Premise: p, OK: err == nil, Err: err})
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rt.log.Info("premise holds", "premise", p.Kind, "when", p.When, "node", p.Node, "holds", p.Holds)
	}
	if len(errs) > 0 {
		return fmt.Errorf("route %s: refused before the first record:\n  %w", pr.Name, joinLines(errs))
	}
	return nil
}

// checkPremise checks or arms one premise; its error names the premise,
// what was found, the reason and the fix.
func (rt *route) checkPremise(ctx context.Context, pr *plan.Route, p plan.Premise) error {
	n := findNode(pr.Nodes, p.Node)
	if n == nil {
		return premiseError(p, "", fmt.Errorf("the plan has no node %q for it", p.Node))
	}
	if p.Kind == plan.PremiseProcessUnchanged {
		// The engine's own: about the process, not a connected system.
		return premiseError(p, n.Role, rt.checkProcess(ctx, p))
	}
	switch p.When {
	case plan.CheckStartup:
		if !checksAtStartup(n.Kind, p.Kind) {
			return premiseError(p, n.Role, fmt.Errorf("this runtime cannot check a %s premise on %s %s", p.Kind, n.Role, n.Kind))
		}
		t := findPremiseTarget(rt.sink, p.Node)
		if t == nil && rt.dlq != nil {
			t = findPremiseTarget(rt.dlq, p.Node) // the dlq's target: its own effectively-once rests on it
		}
		if st, ok := rt.src.(premiseTarget); ok && t == nil && n.Role == plan.RoleSource && st.PremiseNode() == p.Node {
			t = st // a source checking what it reads (postgres_cdc's primary keys)
		}
		if t == nil {
			return premiseError(p, n.Role, fmt.Errorf("%s %s (%s) was not built as an endpoint that can check it", n.Role, n.Kind, n.ID))
		}
		return premiseError(p, n.Role, t.CheckPremise(ctx, p))
	case plan.CheckPerRecord, plan.CheckPerConnection:
		return premiseError(p, n.Role, rt.armPremise(n, p))
	}
	return premiseError(p, n.Role, fmt.Errorf("unknown check time %q", p.When))
}

// armPremise sets up a per-record premise on the node that checks it.
func (rt *route) armPremise(n *plan.Node, p plan.Premise) error {
	switch p.Kind {
	case plan.PremiseProducerID:
		src, ok := rt.src.(producerIDSource)
		if n.Role != plan.RoleSource || !ok {
			return fmt.Errorf("this runtime cannot check a producer-stamped id on %s %s", n.Role, n.Kind)
		}
		src.RequireProducerID(p.Reason)
		return nil
	case plan.PremiseIncreasingID, plan.PremiseSessionKept, plan.PremiseSlotKept:
		src, ok := rt.src.(RecordPremiseSource)
		if n.Role != plan.RoleSource || !ok {
			return fmt.Errorf("this runtime cannot check a %s premise on %s %s", p.Kind, n.Role, n.Kind)
		}
		return src.ArmPremise(p)
	case plan.PremiseKeyPresent:
		switch n.Kind {
		case "id":
			return rt.armIDKey(n, p)
		case "dedup":
			// A dedup key that is missing, empty or fails to evaluate
			// dead-letters its record already (dedupStep).
			return nil
		}
		reg := registry.sinks[n.Kind]
		switch {
		case reg.holdsPremises[p.Kind]:
			// Kept by the sink itself (HoldsPremises): a key or subject
			// template fails a record whose ${…} has no value
			// (recordTemplate.render).
			if n.Role == plan.RoleSink {
				return nil
			}
		case reg.armsPremises[p.Kind]:
			if t := findRecordPremiseTarget(rt.sink, p.Node); t != nil {
				return t.ArmPremise(p)
			}
		}
		return fmt.Errorf("this runtime cannot check that a key is present on %s %s", n.Role, n.Kind)
	}
	return fmt.Errorf("this runtime cannot check a per-record %s premise", p.Kind)
}

// armIDKey makes the `id` step of node n dead-letter a record whose key
// does not render, with the reason, instead of leaving it without an
// identity.
func (rt *route) armIDKey(n *plan.Node, p plan.Premise) error {
	src := strings.TrimSpace(n.Expr)
	for _, s := range rt.steps {
		if st, ok := s.(*idStep); ok && st.prog.src == src {
			st.premise = p.Reason
			return nil
		}
	}
	return fmt.Errorf("id step %s (%s) was not built", n.ID, n.Pos)
}

// premiseError wraps err (nil stays nil) with the premise it is about:
// what was found, the reason the verdict needs the premise, and the fix.
func premiseError(p plan.Premise, role string, err error) error {
	if err == nil {
		return nil
	}
	at := ""
	if p.Pos.Line > 0 {
		at = " (" + p.Pos.String() + ")"
	}
	var f *premiseFailure
	var msg string
	if errors.As(err, &f) {
		msg = fmt.Sprintf("premise not met%s: %s", at, f.Found)
	} else {
		msg = fmt.Sprintf("premise %s%s cannot be checked (%s): %v", p.Kind, at, p.Holds, err)
	}
	if p.Reason != "" {
		msg += "; the verdict needs it for: " + p.Reason
	}
	if f != nil && f.Fix != "" {
		msg += "; fix: " + f.Fix
		if p.Kind != plan.PremiseRepeatInsertable && role != plan.RoleSource {
			// Without a repeat_insertable premise, or one a source
			// reads by, the route is at-most-once, not at-least-once.
			msg += ", or plan the route at-least-once"
		}
	}
	return &premiseErr{msg: msg, err: err}
}

type premiseErr struct {
	msg string
	err error
}

func (e *premiseErr) Error() string { return e.msg }
func (e *premiseErr) Unwrap() error { return e.err }

// joinLines joins errors one per indented line.
func joinLines(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &premiseErr{msg: strings.Join(msgs, "\n  "), err: errors.Join(errs...)}
}

// findNode finds the node with id among ns and their children.
func findNode(ns []plan.Node, id string) *plan.Node {
	for i := range ns {
		if n := findNodeIn(&ns[i], id); n != nil {
			return n
		}
	}
	return nil
}

// findNodeIn finds id in the tree rooted at n, returning a pointer into it.
func findNodeIn(n *plan.Node, id string) *plan.Node {
	if n.ID == id {
		return n
	}
	for j := range n.Children {
		if m := findNodeIn(&n.Children[j].Node, id); m != nil {
			return m
		}
	}
	return nil
}

// findPremiseTarget walks the sink tree for the endpoint built from node id.
func findPremiseTarget(s sink, id string) premiseTarget {
	var found premiseTarget
	walkSinks(s, func(s sink) bool {
		if t, ok := s.(premiseTarget); ok && t.PremiseNode() == id {
			found = t
			return false
		}
		return true
	})
	return found
}

func findRecordPremiseTarget(s sink, id string) recordPremiseTarget {
	var found recordPremiseTarget
	walkSinks(s, func(s sink) bool {
		if t, ok := s.(recordPremiseTarget); ok && t.PremiseNode() == id {
			found = t
			return false
		}
		return true
	})
	return found
}

// verifyGuarantees runs the start-up guarantee check of every sink in the
// tree rooted at s that has one (a ClickHouse table's engine, say), depth
// first, and returns the first failure.
func verifyGuarantees(s sink, guarantee string) error {
	var err error
	walkSinks(s, func(s sink) bool {
		if v, ok := s.(GuaranteeVerifier); ok {
			err = v.VerifyGuarantee(guarantee)
		}
		return err == nil
	})
	return err
}

// walkSinks visits s and every branch below it (BranchingSink) until
// visit returns false.
func walkSinks(s sink, visit func(sink) bool) bool {
	if s == nil {
		return true
	}
	if !visit(s) {
		return false
	}
	if st, ok := s.(BranchingSink); ok {
		for _, b := range st.Branches() {
			if !walkSinks(b, visit) {
				return false
			}
		}
	}
	return true
}

// Check builds every route of p — compiling its expressions and opening
// its connections, as Run does (a sink's create_table runs) — and checks
// every premise, moving no record. It returns one result per premise in
// plan order, one with an empty Premise.Kind for a route that has none
// (OK) or that could not be built at all (not OK, Err says why).
func Check(ctx context.Context, p plan.Plan, opts Options) []PremiseResult {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var results []PremiseResult
	for i := range p.Routes {
		report := &premiseReport{}
		rt, err := buildRoute(context.WithValue(ctx, premiseReportKey{}, report), &p.Routes[i], &opts)
		if err == nil {
			err = rt.close()
		}
		results = append(results, report.results...)
		if err != nil {
			results = append(results, PremiseResult{Route: p.Routes[i].Name, Err: err})
		} else if len(report.results) == 0 {
			results = append(results, PremiseResult{Route: p.Routes[i].Name, OK: true})
		}
	}
	return results
}
