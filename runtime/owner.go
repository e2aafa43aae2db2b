package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// A route's state is its plan's. Stores are found by path (by default
// .mqb/state and .mqb/dedup beside the .mqb files) and a route's keys in
// them by the route's name, so two plans in one directory with a route of
// one name ("load", "main") would share a checkpoint and a dedup
// namespace: the second would resume from the first's position and take
// the first's records for repeats, dropping its own and exiting 0. So
// each position saved records the plan file of the route that saved it,
// and each dedup namespace of a route its owner, the plan file of the
// route that first used it; a route of another plan file finds them and
// refuses to start. `mqbc state adopt` hands a renamed file's state over.
// A plan made without a file (the tests' hand-made plans) records and
// checks nothing, and state saved before owners were kept is taken over
// by the first route to run on it.

// planFile is the base name of the .mqb file declaring pr ("" for none).
func planFile(pr *plan.Route) string {
	if pr.Pos.File == "" {
		return ""
	}
	return filepath.Base(pr.Pos.File)
}

// StateOwnedError is a route refused because its state belongs to the
// route of the same name in another plan file.
type StateOwnedError struct {
	Route, Plan, Owner string
	What               string // "its checkpoint in DIR", "its dedup namespace NS in DIR"
}

func (e *StateOwnedError) Error() string {
	return fmt.Sprintf("route %s of %s: %s belongs to the route %s of %s. Two plans with a route of one name share this state: "+
		"each would resume from the other's position and take the other's records for repeats. "+
		"Rename one of the routes, or give each plan its own state (mqbc run --state DIR). "+
		"If %s is %s renamed, hand it the state: mqbc state adopt %s %s",
		e.Route, e.Plan, e.What, e.Route, e.Owner, e.Plan, e.Owner, e.Plan, e.Route)
}

// claimDedup checks that st's namespace is the route's own, and records
// the route's plan as its owner when no plan is recorded yet. A shared
// namespace (the dedup step's namespace attribute) is shared on purpose.
func (rt *route) claimDedup(st dedupStore, shared bool) error {
	if rt.plan == "" || shared {
		return nil
	}
	owner, found, err := st.Owner()
	if err != nil {
		return err
	}
	switch {
	case !found:
		return st.SetOwner(rt.plan)
	case owner != rt.plan:
		return &StateOwnedError{Route: rt.name, Plan: rt.plan, Owner: owner,
			What: fmt.Sprintf("its dedup namespace %s in %s", st.Namespace(), st.Where())}
	}
	return nil
}

// claimCheckpoint refuses a position that another plan's route saved,
// and records the route's plan in one saved without an owner (by a plan
// made without a file, or before owners were kept), so that the claim
// holds from the start and not from the first commit.
func (rt *route) claimCheckpoint(pos checkpoint.Position, found bool) error {
	if !found || rt.plan == "" || pos.Plan == rt.plan {
		return nil
	}
	if pos.Plan == "" {
		pos.Plan = rt.plan
		if err := rt.cp.Save(rt.name, pos); err != nil {
			return fmt.Errorf("route %s: %w", rt.name, err)
		}
		return nil
	}
	return &StateOwnedError{Route: rt.name, Plan: rt.plan, Owner: pos.Plan,
		What: "its checkpoint in " + plan.RedactURLs(rt.cp.Where())}
}

// OwnedElsewhere returns the error a run of the route would stop with
// because part of its state belongs to another plan file's route; nil
// when every part is the route's own or has no owner recorded.
func (s RouteState) OwnedElsewhere() *StateOwnedError {
	if s.Plan == "" {
		return nil
	}
	if cp := s.Checkpoint; cp != nil && cp.Found && cp.Position.Plan != "" && cp.Position.Plan != s.Plan {
		return &StateOwnedError{Route: s.Route, Plan: s.Plan, Owner: cp.Position.Plan, What: "its checkpoint in " + cp.Where}
	}
	for _, d := range s.Dedup {
		if !d.Shared() && d.Owner != "" && d.Owner != s.Plan {
			return &StateOwnedError{Route: s.Route, Plan: s.Plan, Owner: d.Owner,
				What: fmt.Sprintf("its dedup namespace %s in %s", d.Namespace, d.Where)}
		}
	}
	return nil
}

// AdoptRouteState hands route's state to its plan file: its checkpoint
// and its own dedup namespaces are recorded as the route's of this plan,
// whichever plan they belonged to. For a plan file renamed, as the
// refusal says; run it while the route is stopped (a SQL checkpoint is
// taken over, fencing a running instance). It returns the state as it
// was before.
func AdoptRouteState(ctx context.Context, p plan.Plan, o Options, route string) (RouteState, error) {
	rs, before, err := openRouteState(ctx, p, o, route, time.Now())
	if rs == nil || err != nil {
		return before, err
	}
	defer rs.close()
	if rs.plan == "" {
		return before, fmt.Errorf("route %s: the plan names no file to hand the state to", route)
	}
	if rs.cp != nil {
		pos, found, err := rs.cp.Load(route)
		if err == nil && found && pos.Plan != rs.plan {
			pos.Plan = rs.plan
			err = rs.cp.Save(route, pos)
		}
		if err != nil {
			return before, fmt.Errorf("route %s: %s", route, plan.RedactURLs(err.Error()))
		}
	}
	for _, d := range rs.dedup {
		if d.st == nil || strings.HasPrefix(d.ns, "shared/") {
			continue
		}
		if err := d.st.SetOwner(rs.plan); err != nil {
			return before, fmt.Errorf("route %s: %s", route, plan.RedactURLs(err.Error()))
		}
	}
	return before, nil
}
