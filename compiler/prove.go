package compiler

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// guaranteeProof is a route's verdict on the ladder (plan.ExactlyOnce …
// plan.AtMostOnce) with the reasons that prove it, and, below
// effectively-once, the effect that weakens it.
type guaranteeProof struct {
	verdict string
	reasons []string
	// missing names the weakest effect and why it is weak: the E045
	// message and the "not effectively-once" line.
	missing string
	// premises back the proof: the runtime checks them only when the
	// verdict is effectively-once or better.
	premises []premiseAt
	// guards are premises the route needs whatever its verdict (a dedup
	// keyed on a producer's id drops distinct records without it).
	guards []premiseAt
	// floor are premises the verdict rests on when it is at-least-once or
	// better: what keeps a record from being lost (a handler's replay
	// that cannot fail on a unique key), checked then like premises.
	floor []premiseAt
	weak  []weakEffect
}

// effectivelyOnce reports whether the verdict is effectively-once or
// better.
func (g guaranteeProof) effectivelyOnce() bool {
	return plan.GuaranteeRank(g.verdict) >= plan.GuaranteeRank(plan.EffectivelyOnce)
}

// weaken lowers the verdict to rung for the effect described by why. Every
// weakening effect is kept: missing lists them, weakest first.
func (g *guaranteeProof) weaken(rung, why string) {
	if plan.GuaranteeRank(rung) < plan.GuaranteeRank(g.verdict) {
		g.verdict = rung
	}
	if why == "" || slices.ContainsFunc(g.weak, func(w weakEffect) bool { return w.why == why }) {
		return
	}
	g.weak = append(g.weak, weakEffect{rung, why})
	slices.SortStableFunc(g.weak, func(a, b weakEffect) int {
		return plan.GuaranteeRank(a.rung) - plan.GuaranteeRank(b.rung)
	})
	parts := make([]string, len(g.weak))
	for i, w := range g.weak {
		parts[i] = w.why
	}
	g.missing = strings.Join(parts, "; ")
}

// weakEffect is one effect below effectively-once.
type weakEffect struct{ rung, why string }

// premiseAt is a premise of the proof about one node; emit fills in the
// node's plan ID.
type premiseAt struct {
	node *nodeInfo
	p    plan.Premise
}

// sinkProof is the verdict for one sink (or handler, or branch).
type sinkProof struct {
	ok bool
	// keyed: the write has a conflict key bound to stable values, so a
	// repeat is detected (report_outcome is deterministic) even when the
	// update it then applies is not idempotent.
	keyed bool
	// replayFails: a repeat of the write fails (a plain INSERT into a
	// table with a unique key, or one mqb cannot see): the record is
	// dead-lettered instead of passed on, so as a handler it keeps the
	// record from the sink after it.
	replayFails bool
	// replayWhy says why a repeat of a write with a conflict clause can
	// fail (upsertMayFailOnReplay); "" for a plain INSERT or a statement
	// mqb cannot read.
	replayWhy string
	// replayPremises back replayFails = false when it rests on a table
	// create_table shows but that may already exist with other unique
	// keys (PremiseRepeatInsertable).
	replayPremises []premiseAt
	// loses: a record can reach none of the writes (a switch on the
	// outcome of the record's own write, with no default): at-most-once.
	loses    string
	reasons  []string
	missing  string
	premises []premiseAt
	// absorbs are the placeholder expressions a repeat of which the write
	// absorbs, keeping the first row untouched: each is bound to a
	// column that is alone a unique key the conflict clause handles (see
	// elidableDedup).
	absorbs      []string
	absorbClause string // the clause that absorbs them, as written
	// table is the table a sql sink's statement writes, when mqb reads
	// the statement in full (the outbox's premise names it).
	table string
}

// prove applies DESIGN §3 to a route. The verdict is the weakest over
// every effect the route has: the source (at-most-once when it cannot
// replay), every filter (its decision must repeat), the handler, the sink
// and each branch of a switch, request or fan-out below it. The sink is
// effectively-once when its write is key-addressed and idempotent with a
// stable key, or positionally named over a replayable source. The DLQ is
// an effect of its own: its guarantee is reported on its own line and does
// not lower the route's, which is about the records that reach the sink.
func (rc *routeCtx) prove(source, handler, sink *nodeInfo) guaranteeProof {
	g := guaranteeProof{verdict: plan.EffectivelyOnce}
	if loss := rc.sourceLoss(source); loss != "" {
		g.weaken(plan.AtMostOnce, "source: "+loss+" (at-most-once)")
	}
	if rc.idText != "" {
		g.reasons = append(g.reasons, fmt.Sprintf("identity: id %s (%s)", rc.idText, rc.idStab))
	}
	var stableDedup *nodeInfo
	for _, d := range rc.dedups {
		key, ttl := d.attrs["key"], d.attrs["ttl"]
		if key == nil || ttl == nil {
			continue
		}
		g.reasons = append(g.reasons, fmt.Sprintf("dedup: key %s (%s), remembered for %s", key.val.Expr, key.stab, ttl.val.Str))
		if key.stab.Stable && stableDedup == nil {
			stableDedup = d
		}
	}
	for _, n := range rc.nodes {
		if n.role == plan.RoleStep && n.name == "filter" && n.exprStab.Outcome != "" {
			g.weaken(plan.AtMostOnce, fmt.Sprintf("filter %s decides on meta[%q], the outcome of the record's own write, which is truthful only on its first delivery: after a crash between that write and the sink's, the replay reads \"existed\" and the filter can drop a record the sink never got; filter on a stable value, or route the outcome with a switch whose every branch writes", n.exprText, n.exprStab.Outcome))
			continue
		}
		if n.role == plan.RoleStep && n.name == "filter" {
			rc.keyReadsProcess(n.exprStab) // a decision a replay must repeat
		}
		if n.role == plan.RoleStep && n.name == "filter" && !n.exprStab.Stable && n.exprStab.Why != mqbIDUnset && n.exprText != "" {
			g.weaken(plan.AtLeastOnce, fmt.Sprintf("filter %s is per-delivery (%s), so a replay can decide differently: a record one delivery wrote can be dropped by the next, and one it dropped can be written", n.exprText, n.exprStab.Why))
		}
	}
	if handler != nil {
		hp := rc.proveSink(handler)
		if hp.ok {
			g.reasons = append(g.reasons, "handler: "+handler.name+" runs before the sink; its own write is idempotent ("+strings.Join(hp.reasons, "; ")+"), so a replay re-runs it without landing twice")
			g.premises = append(g.premises, hp.premises...)
		} else if hp.replayFails {
			what := "its plain INSERT fails when replayed (the table has, or may have, a unique key whose values the repeat writes again)"
			fails := "a replay fails on a unique key"
			fix := strings.TrimPrefix(hp.missing, "sink write is not idempotent: plain INSERT; ")
			if hp.replayWhy != "" {
				what = hp.replayWhy
				fails = "a replay may fail on a unique key its conflict clause does not handle"
				fix = strings.TrimPrefix(strings.TrimPrefix(hp.missing, "sink write is not proven idempotent: "), "sink write is not idempotent: ")
			} else if fix == hp.missing {
				// A statement mqb cannot read: it may be such an INSERT.
				what = "its statement, which mqb cannot read in full, may fail when replayed (a plain INSERT into a keyed table does)"
				fails = "a replay may fail"
				fix = strings.TrimPrefix(hp.missing, "sink write is not proven idempotent: ")
			}
			g.reasons = append(g.reasons, "handler: "+handler.name+" runs before the sink and "+what+": a record replayed after a crash is dead-lettered by the handler and never reaches the sink (at-most-once); without a dlq the route stops at it")
			g.weaken(plan.AtMostOnce, "handler "+handler.name+": "+fails+" and the sink never gets the record; "+fix)
		} else {
			line := "handler: " + handler.name + " runs before the sink's idempotency and its own effect is not idempotent, so a replay runs it again and its effect lands twice (at-least-once)"
			if len(hp.replayPremises) > 0 {
				line += "; its replay does not fail on a unique key, given the " + plan.PremiseRepeatInsertable + " premise on table " + hp.replayPremises[0].p.Target + " (checked at start-up)"
			}
			g.floor = append(g.floor, hp.replayPremises...)
			if stableDedup != nil {
				line += "; the dedup above keeps duplicates away from it only within its ttl, not across a crash before the commit"
			}
			g.reasons = append(g.reasons, line)
			missing := strings.TrimPrefix(hp.missing, "sink write is not idempotent: ")
			if missing == "" {
				missing = "its effect is not idempotent"
			}
			g.weaken(plan.AtLeastOnce, "handler "+handler.name+" is not idempotent: "+missing)
		}
	}
	if sink == nil {
		why := "the route has no sink"
		if source == nil {
			why = "the route has no source and no sink"
		}
		g.weaken(plan.AtLeastOnce, why)
		return g
	}
	outbox := handler == nil && rc.outboxApplies(source, sink)
	rc.outbox = outbox
	sp := rc.proveSink(sink)
	rc.outbox = false
	if outbox && sp.table == "" {
		// The outbox holds only when the table the statement writes rolls
		// back with the position (a MyISAM table does not): a statement
		// mqb cannot read names no table to check.
		outbox = false
		g.reasons = append(g.reasons, outboxUnreadReason)
	}
	if sp.ok || sink.kind == nil || sink.kind.Structural || outbox {
		// An unproven plain sink is explained by the "not effectively-once"
		// line; its own write line would only repeat it.
		g.reasons = append(g.reasons, sp.reasons...)
	}
	g.premises = append(g.premises, sp.premises...)
	switch {
	case outbox:
		g.reasons = append(g.reasons, outboxReason)
		g.premises = append(g.premises, premiseAt{node: sink, p: plan.Premise{Kind: plan.PremiseTransactionalTable, When: plan.CheckStartup, Target: sp.table,
			Holds:  fmt.Sprintf("table %s is transactional (InnoDB on MySQL and MariaDB; an ordinary or partitioned table on PostgreSQL), so its rows roll back with the outbox position", sp.table),
			Reason: outboxReason}})
		if g.verdict == plan.EffectivelyOnce && len(g.weak) == 0 {
			g.verdict = plan.ExactlyOnce
		}
	case !sp.ok:
		g.weaken(plan.AtLeastOnce, sp.missing)
	}
	if sp.loses != "" {
		g.weaken(plan.AtMostOnce, sp.loses)
	}
	if !sp.ok && sink.kind != nil && sink.kind.Broker {
		if stableDedup != nil {
			g.reasons = append(g.reasons, fmt.Sprintf("note: duplicates filtered within ttl (%s) by dedup before %s", stableDedup.attrs["ttl"].val.Str, sink.name))
		} else {
			g.reasons = append(g.reasons, "note: no dedup with a stable key before the broker, so consumers see every replay")
		}
	}
	mayOutbox := !outbox && handler == nil && rc.outboxMayApply(source, sink)
	if outbox || mayOutbox {
		rc.outboxDedups(&g, handler, sink, sp, mayOutbox)
	}
	dlqReasons, dlqPremises := rc.dlqReasons(outbox, mayOutbox)
	g.reasons = append(g.reasons, dlqReasons...)
	// The dlq's premises are checked whatever the route's verdict: the
	// dlq's own effectively-once rests on them.
	g.guards = append(g.guards, dlqPremises...)
	rc.producerPremises(&g, source)
	rc.idPremise(&g)
	rc.sourcePremises(&g, source)
	rc.processPremise(&g, source)
	if d := rc.elidableDedup(handler, sink, sp); d != nil && g.effectivelyOnce() {
		rc.elideDedup(&g, d, sink, sp)
	}
	return g
}

// elidableDedup returns the route's dedup when the sink already does what
// it does: it is the route's only dedup, keyed on a stable expression the
// sink's conflict clause absorbs every repeat of while keeping the first
// row (sinkProof.absorbs), nothing but retry and dlq stands between it and
// the sink, records reach the sink in read order (concurrency 1, no
// handler) and its keys are its own (no namespace, keep unset). Under
// those conditions the table ends the same with or without it, except for
// a key whose first record the sink refuses (see stdlib's keep).
func (rc *routeCtx) elidableDedup(handler, sink *nodeInfo, sp sinkProof) *nodeInfo {
	if rc.inNamedUnused || handler != nil || len(rc.dedups) != 1 || rc.concurrency != 1 ||
		sink == nil || sink.kind == nil || sink.kind.Name != "sql" || boolAttr(sink, "report_outcome") || len(sp.absorbs) == 0 {
		return nil
	}
	d := rc.dedups[0]
	key := d.attrs["key"]
	if key == nil || !key.stab.Stable || !slices.Contains(sp.absorbs, key.val.Expr) || boolAttr(d, "keep") {
		return nil
	}
	if ns := d.attrs["namespace"]; ns != nil && ns.val.Str != "" {
		return nil
	}
	i := slices.Index(rc.nodes, d)
	j := slices.Index(rc.nodes, sink)
	if i < 0 || j < i {
		return nil
	}
	for _, n := range rc.nodes[i+1 : j] {
		if n.role != plan.RoleStep || n.name != "retry" && n.name != "dlq" {
			return nil
		}
	}
	return d
}

// elideDedup takes d out of the route and says so in the verdict.
func (rc *routeCtx) elideDedup(g *guaranteeProof, d, sink *nodeInfo, sp sinkProof) {
	key := d.attrs["key"].val.Expr
	why := fmt.Sprintf("dedup elided: %s keeps the first row of %s and absorbs its repeats, as the dedup would (they count as deduplicated; keep = true runs the dedup)", sp.absorbClause, key)
	for i, r := range g.reasons {
		if strings.HasPrefix(r, "dedup: key "+key+" ") {
			g.reasons[i] = why
			why = ""
			break
		}
	}
	if why != "" {
		g.reasons = append(g.reasons, why)
	}
	rc.elided = d
	rc.elidedBy = sink
}

// sourceLoss says why the source is at-most-once as configured, or "".
func (rc *routeCtx) sourceLoss(source *nodeInfo) string {
	if source == nil || source.kind == nil {
		return ""
	}
	for _, l := range source.kind.AtMostOnce {
		if l.Attr == "" {
			return l.Why // whatever its settings (stdin)
		}
		a := source.attrs[l.Attr]
		if a == nil {
			continue
		}
		v := a.val.Str
		switch a.val.Type {
		case plan.TBool:
			v = fmt.Sprint(a.val.Bool)
		case plan.TInt:
			v = fmt.Sprint(a.val.Int)
		}
		if v == l.Value {
			return l.Why
		}
	}
	return ""
}

// dlqReasons proves each dlq step's target as an effect of its own. A
// dead-letter write that is not idempotent is at-least-once: a crash
// between the DLQ write and the commit of the record's position writes the
// record to the DLQ again.
func (rc *routeCtx) dlqReasons(outbox, mayOutbox bool) ([]string, []premiseAt) {
	var out []string
	var premises []premiseAt
	for _, n := range rc.nodes {
		if n.role != plan.RoleStep || n.name != "dlq" || len(n.children) == 0 || n.children[0].node == nil {
			continue
		}
		target := n.children[0].node
		if outbox || mayOutbox {
			// The sink's transaction commits the position past every
			// record of the batch, the ones it refused and the ones dead
			// before it included, and the DLQ is written outside it
			// (connector/sql/outbox.go): a crash between that commit and
			// the DLQ's write leaves such a record in neither, and the
			// rerun starts after it.
			out = append(out, fmt.Sprintf("dlq: at-most-once (under the transactional outbox the source position commits in the sink's transaction, past the records of its batch that go to the dlq, and the %s write comes after that commit: a crash in between loses them; for a dlq that keeps every record, run the route without the outbox: concurrency 2 or more, with a conflict clause that absorbs replays)", target.name))
			if mayOutbox {
				out[len(out)-1] = strings.Replace(out[len(out)-1], "(under the transactional outbox", "(the runtime may run the route under the transactional outbox, as the sql urls may render to one database; under it", 1)
			}
			continue
		}
		var dp sinkProof
		rc.deadLetter, rc.dlqNotes = true, nil
		rc.quietly(func() { dp = rc.proveSink(target) })
		notes := rc.dlqNotes
		rc.deadLetter, rc.dlqNotes = false, nil
		// A per-record premise cannot back a dead-letter write: a record
		// that broke it there has no dlq of its own to go to, so the
		// runtime checks none there (a NULL key, say, would land again
		// on a replay). Start-up premises are checked as on any sink.
		var perRecord []string
		for _, pa := range dp.premises {
			if pa.p.When != plan.CheckStartup {
				perRecord = append(perRecord, pa.p.Holds)
			}
		}
		if dp.ok && len(perRecord) == 0 {
			out = append(out, fmt.Sprintf("dlq: effectively-once (%s %s)", target.name, strings.Join(dp.reasons, "; ")))
			for _, pa := range dp.premises {
				pa.p.Reason = "dlq: " + pa.p.Reason
				premises = append(premises, pa)
			}
			continue
		}
		if dp.ok {
			out = append(out, fmt.Sprintf("dlq: at-least-once (the %s write is idempotent only if %s, which is not checked on a dead-letter target; a crash between the write and the commit writes the dead-lettered record again)",
				target.name, strings.Join(perRecord, " and ")))
			continue
		}
		why := ""
		if len(notes) > 0 {
			why = strings.Join(notes, "; ") + ": a dead-letter target is written by time; "
		}
		out = append(out, fmt.Sprintf("dlq: at-least-once (%sa crash between the %s write and the commit writes the dead-lettered record again)", why, target.name))
	}
	return out, premises
}

// quietly runs f without reporting route diagnostics: for proofs made only
// to report a guarantee (the DLQ's), whose target's own mistakes the
// runtime reports as a dead-letter endpoint.
func (rc *routeCtx) quietly(f func()) {
	prev := rc.inNamedUnused
	rc.inNamedUnused = true
	defer func() { rc.inNamedUnused = prev }()
	f()
}

// producerPremises adds the per-record premise that every record carries
// its producer's id when a value the route keys on rests on message_id of
// a source whose ids come from the producer (Kafka, NATS). A dedup keyed
// on it needs the premise whatever the verdict: without the header,
// distinct records could share an id and be dropped as duplicates.
func (rc *routeCtx) producerPremises(g *guaranteeProof, source *nodeInfo) {
	if source == nil || source.kind == nil || source.kind.IDs != stdlib.IDsFromProducer {
		return
	}
	var proofUses, guardUses []string
	if rc.idText != "" && rc.idStab.Stable && rc.idStab.ProducerID != "" {
		proofUses = append(proofUses, "identity: id "+rc.idText)
	}
	for _, d := range rc.dedups {
		if k := d.attrs["key"]; k != nil && k.stab.Stable && k.stab.ProducerID != "" {
			guardUses = append(guardUses, "dedup: key "+k.val.Expr)
		}
	}
	for _, n := range rc.nodes {
		if n.role == plan.RoleSink || n.role == plan.RoleHandler {
			proofUses = append(proofUses, producerUses(n)...)
		}
	}
	if len(proofUses)+len(guardUses) == 0 {
		return
	}
	target, header := "", "mq_bridge.message_id header"
	holdsWithout := ""
	if f := source.kind.ProducerID; f != nil {
		header, holdsWithout = f.Header, f.Without
		if t := source.attrs[f.Target]; t != nil {
			target = templateOrStr(t)
		}
	}
	holds := fmt.Sprintf("every record from %s %s carries the %s its producer stamped", source.kind.Name, target, header)
	if holdsWithout != "" {
		holds += " (without it, " + holdsWithout + ")"
	}
	mk := func(uses []string) premiseAt {
		return premiseAt{node: source, p: plan.Premise{Kind: plan.PremiseProducerID, When: plan.CheckPerRecord, Target: target,
			Holds: holds, Reason: strings.Join(uses, "; ")}}
	}
	if len(guardUses) > 0 {
		g.guards = append(g.guards, mk(append(guardUses, proofUses...)))
	} else {
		g.premises = append(g.premises, mk(proofUses))
	}
}

// processPremise adds, when the route's expressions read the process
// (env("X"), the local time zone), the start-up premise that what they
// read has not changed since the route last stopped with records in
// flight: a record delivered before a crash and read again after a
// restart with another value would get another key or decision, and land
// twice. Every read counts, not only keys': a filter or switch reading
// env("X") decides anew as well.
func (rc *routeCtx) processPremise(g *guaranteeProof, source *nodeInfo) {
	if source == nil || len(rc.processReads) == 0 {
		return
	}
	reads := slices.Sorted(maps.Keys(rc.processReads))
	names := make([]string, len(reads))
	for i, r := range reads {
		if v, ok := strings.CutPrefix(r, plan.ProcessEnvPrefix); ok {
			names[i] = fmt.Sprintf("env(%q)", v)
		} else {
			names[i] = "the " + r
		}
	}
	what := strings.Join(names, ", ")
	g.premises = append(g.premises, premiseAt{node: source, p: plan.Premise{Kind: plan.PremiseProcessUnchanged, When: plan.CheckStartup, Columns: reads,
		Holds:  what + " unchanged since the route last stopped with records in flight (a crash, SIGKILL or a failed record; a drained stop resets it)",
		Reason: "the route's keys and decisions read " + what + ": the records it replays after such a stop are keyed and decided as before"}})
}

// idPremise adds, when the route's identity comes from an id step, the
// per-record premise that its expression renders a value, if a record
// for which it renders nothing would go on with a per-delivery identity
// instead: the one an earlier id step gave it (id message_id above id
// payload.id: soundness seed 3206), or, when unnest follows, ids its
// elements derive from a message_id that is new on every read (seed
// 2763). Either way a sink keyed on meta["mqb.id"] writes such a record
// again on a replay. The runtime dead-letters it at the id step instead
// (armIDKey). A record with no identity at all is dead-lettered by the
// sink's bind already.
//
// It is a guard, checked whatever the verdict: the proof calls the
// identity stable below effectively-once too, and rests on it there. A
// handler's upsert keyed on meta["mqb.id"] counts on its replay
// conflicting on that key; with a per-delivery identity the replay
// inserts anew and may fail on another unique column, and the record,
// dead-lettered by the handler, never reaches the sink of an
// at-least-once route (soundness seed 16029).
func (rc *routeCtx) idPremise(g *guaranteeProof) {
	if !rc.idStab.Stable {
		return
	}
	var last *nodeInfo
	for _, n := range rc.nodes {
		if n.role == plan.RoleStep && n.name == "id" {
			last = n
		}
	}
	if last == nil || !last.exprStab.Stable {
		return
	}
	saved := rc.msgIDAfter
	rc.msgIDAfter = nil
	msg := rc.messageIDStability()
	rc.msgIDAfter = saved
	// The identities a record may have just before the last id step
	// (has: some step may have given it one; cur: how stable they all
	// are), and whether it may have none at all. An id step whose
	// expression renders nothing leaves the identity as it was, so one
	// above the last, however stable, does not make sure the record has
	// one: `id "${payload.id}-${payload.tag}"` twice, then unnest, left
	// a record without a tag with no identity at either, and its elements
	// derived theirs from its message_id (soundness seed 21236). Only an
	// unnest gives every record one (its elements'; from the message_id
	// when the parent has none).
	var cur stability
	has, maybeNone, unnestAfter := false, true, false
	seen := false
	add := func(st stability) {
		if has {
			cur = both(cur, st)
		} else {
			cur, has = st, true
		}
	}
	for _, n := range rc.nodes {
		if n.role != plan.RoleStep {
			continue
		}
		if n == last {
			seen = true
			continue
		}
		switch {
		case n.name == "unnest" && seen:
			unnestAfter = true
		case n.name == "unnest":
			if maybeNone {
				add(msg)
				maybeNone = false
			}
		case n.name == "id" && !seen:
			add(n.exprStab)
		}
	}
	var why string
	switch {
	case has && !cur.Stable:
		why = "the record keeps the identity it had before, which is per-delivery: " + cur.Why
	case maybeNone && unnestAfter && !msg.Stable && has:
		why = "nor a value at the id steps above it, unnest derives its elements' ids from a message_id that is new on every read: " + msg.Why
	case maybeNone && unnestAfter && !msg.Stable:
		why = "unnest derives its elements' ids from a message_id that is new on every read: " + msg.Why
	default:
		return
	}
	g.guards = append(g.guards, premiseAt{node: last, p: plan.Premise{Kind: plan.PremiseKeyPresent, When: plan.CheckPerRecord, Columns: []string{last.exprText},
		Holds:  fmt.Sprintf("every record's id %s renders a non-empty value (without one, %s)", last.exprText, why),
		Reason: "identity: id " + rc.idText}})
}

// sourcePremises adds what the source declares it assumes to lose nothing
// (stdlib Kind.SourcePremises): a guard, carried whatever the verdict,
// since even at-least-once rests on it. A source at-most-once as
// configured (mqtt's qos = 0 or on_session_lost = resubscribe) promises
// nothing they would guard, and carries none.
func (rc *routeCtx) sourcePremises(g *guaranteeProof, source *nodeInfo) {
	if source == nil || source.kind == nil || rc.sourceLoss(source) != "" {
		return
	}
	for _, sp := range source.kind.SourcePremises {
		if sp.If != "" && !boolAttr(source, sp.If) {
			continue
		}
		when := plan.CheckPerRecord
		if sp.When != "" {
			when = sp.When
		}
		var parts []string
		for _, attr := range sp.Target {
			if a := source.attrs[attr]; a != nil {
				parts = append(parts, templateOrStr(a))
			}
		}
		// A url's user and password are not written into the plan.
		target := plan.RedactURLs(strings.Join(parts, "."))
		if target == "" {
			target = sp.Unnamed
		}
		g.guards = append(g.guards, premiseAt{node: source, p: plan.Premise{Kind: sp.Kind, When: when, Target: target,
			Holds: fmt.Sprintf(sp.Holds, target), Reason: "source: " + sp.Why}})
	}
}

// producerUses lists the attributes of n (and its branches) whose value
// rests on a producer-stamped id. For an insert_query that is any bound
// value: the SQL proof does not say which columns it keyed on, so the
// premise may be wider than the key.
func producerUses(n *nodeInfo) []string {
	if n == nil {
		return nil
	}
	var out []string
	names := make([]string, 0, len(n.attrs))
	for k := range n.attrs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		a := n.attrs[k]
		if a.stab.Stable && a.stab.ProducerID != "" {
			out = append(out, fmt.Sprintf("write: %s %s reads message_id", n.name, k))
			continue
		}
		for _, p := range a.parts {
			if p.stab.Stable && p.stab.ProducerID != "" {
				out = append(out, fmt.Sprintf("write: %s %s binds %s", n.name, k, p.expr))
				break
			}
		}
	}
	for _, b := range n.children {
		out = append(out, producerUses(b.node)...)
	}
	return out
}

func templateOrStr(a *attrInfo) string {
	if a.val.Type == plan.TTemplate {
		return strings.Trim(templateText(a.val.Template), `"`)
	}
	return a.val.Str
}

// outboxReason is the exactly-once verdict's reason.
const outboxReason = "source position committed in the sink's transaction (transactional outbox, table mqb_outbox): each source row is written exactly once, even by a plain INSERT"

// outboxUnreadReason says why a route the runtime runs under the outbox
// is not exactly-once by it.
const outboxUnreadReason = "transactional outbox: not counted on, as mqb cannot read which table insert_query writes, and so cannot check at start-up that it rolls back with the position (a MyISAM table keeps the rows of a transaction a crash cut short, and the replay writes them again)"

// outboxApplies reports whether the runtime will run the route with the
// transactional outbox (connector/sql/outbox.go, WireOutbox): a sql cursor
// source and a sql sink (not behind a handler, a switch or a fan-out) on
// the same database as the same user (plan.SameDatabase, which the runtime
// calls too), at concurrency 1. The caller checks that there is no handler.
func (rc *routeCtx) outboxApplies(source, sink *nodeInfo) bool {
	if !rc.outboxShape(source, sink) {
		return false
	}
	a, aStatic, ok1 := urlText(source.attrs["url"])
	b, bStatic, ok2 := urlText(sink.attrs["url"])
	switch {
	case !ok1 || !ok2:
		return false
	case aStatic && bStatic:
		return plan.SameDatabase(a, b)
	default:
		// Placeholders (env(), secrets) are only known at run time: the
		// same written url renders the same, and the source only reads
		// postgres:// and mysql:// urls, so the sink then shares its
		// database. Different written urls are not proven the same.
		return a == b
	}
}

// outboxShape reports whether the route has the shape the runtime wires
// the outbox on when the two urls name one database.
func (rc *routeCtx) outboxShape(source, sink *nodeInfo) bool {
	return source != nil && sink != nil && source.kind != nil && sink.kind != nil &&
		source.kind.Name == "sql" && sink.kind.Name == "sql" && !source.broken && !sink.broken &&
		source.role == plan.RoleSource && sink.role == plan.RoleSink && rc.concurrency == 1 && sink.attrs["insert_query"] != nil
}

// outboxMayApply reports whether the runtime may run the route with the
// outbox although outboxApplies could not prove it: urls with
// placeholders written differently may render to one database (the
// runtime compares them rendered, plan.SameDatabase, which leaves the
// password out). Only what is known to name two databases (two static
// urls) keeps it off. The DLQ's guarantee follows it (dlqReasons).
func (rc *routeCtx) outboxMayApply(source, sink *nodeInfo) bool {
	if !rc.outboxShape(source, sink) {
		return false
	}
	a, aStatic, ok1 := urlText(source.attrs["url"])
	b, bStatic, ok2 := urlText(sink.attrs["url"])
	if !ok1 || !ok2 {
		return true
	}
	if aStatic && bStatic {
		return plan.SameDatabase(a, b)
	}
	return true
}

// urlText is the written form of a url attribute and whether it has no
// placeholders.
func urlText(a *attrInfo) (text string, static, ok bool) {
	if a == nil {
		return "", false, false
	}
	switch a.val.Type {
	case plan.TString:
		return a.val.Str, true, true
	case plan.TTemplate:
		var lit strings.Builder
		for _, p := range a.val.Template {
			if p.Expr != "" {
				return templateText(a.val.Template), false, true
			}
			lit.WriteString(p.Lit)
		}
		return lit.String(), true, true
	}
	return "", false, false
}

// proveSink decides how the node absorbs a repeated write.
func (rc *routeCtx) proveSink(n *nodeInfo) sinkProof {
	if n == nil || n.kind == nil {
		return sinkProof{missing: "the sink did not check"}
	}
	k := n.kind
	if n.broken && !k.Structural {
		return sinkProof{missing: fmt.Sprintf("%s has errors (see above)", k.Name)}
	}
	if k.Structural {
		return rc.proveStructural(n)
	}
	switch k.Name {
	case "sql":
		return rc.proveSQL(n)
	case "mongodb":
		return rc.proveMongo(n)
	case "clickhouse":
		return rc.proveClickHouse(n)
	case "file", "object_store":
		return rc.provePositional(n)
	}
	p := sinkProof{}
	if k.Broker {
		p.reasons = []string{fmt.Sprintf("write: %s is a broker and cannot absorb a repeat", k.Name)}
		p.missing = fmt.Sprintf("sink write is not idempotent: a %s broker cannot absorb a repeat", k.Name)
	} else {
		p.reasons = []string{fmt.Sprintf("write: %s has no key to absorb a repeat", k.Name)}
		p.missing = fmt.Sprintf("sink write is not idempotent: %s has no key to absorb a repeat", k.Name)
	}
	return p
}

func (rc *routeCtx) proveStructural(n *nodeInfo) sinkProof {
	p := sinkProof{ok: len(n.children) > 0}
	if len(n.children) == 0 {
		p.missing = n.name + " has no branches"
	}
	if on := n.attrs["on"]; n.name == "switch" && on != nil {
		rc.keyReadsProcess(on.stab) // its branch is a decision a replay must repeat
	}
	if on := n.attrs["on"]; n.name == "switch" && on != nil && !on.stab.Stable {
		// A replay can take another branch than the delivery that wrote:
		// each branch may be idempotent, yet the record lands in both.
		p.ok = false
		p.missing = fmt.Sprintf("switch on %s is per-delivery (%s): a replay can send a record down another branch, so it lands in both", on.val.Expr, on.stab.Why)
		p.reasons = append(p.reasons, "switch: on "+on.val.Expr+" is per-delivery, so a replay can take another branch")
		if on.stab.Outcome != "" && !slices.ContainsFunc(n.children, func(b branchInfo) bool { return b.label == plan.BranchDefault }) {
			p.loses = fmt.Sprintf("switch on %s has no default branch and decides on meta[%q], the outcome of the record's own write, truthful only on its first delivery: after a crash between that write and the branch's, the replay reads \"existed\", which a record the branch never got may match no case of; add a default branch", on.val.Expr, on.stab.Outcome)
		}
	}
	for _, b := range n.children {
		label := b.label
		if b.label == plan.BranchCase {
			label = fmt.Sprintf("case %q", b.match)
		}
		bp := rc.proveSink(b.node)
		p.premises = append(p.premises, bp.premises...)
		if p.loses == "" && bp.loses != "" {
			p.loses = fmt.Sprintf("%s %s: %s", n.name, label, bp.loses)
		}

		for _, r := range bp.reasons {
			p.reasons = append(p.reasons, fmt.Sprintf("%s %s: %s", n.name, label, r))
		}
		if !bp.ok {
			if p.missing == "" {
				p.missing = fmt.Sprintf("%s %s: %s", n.name, label, bp.missing)
			}
			p.ok = false
		}
	}
	return p
}

func (rc *routeCtx) provePositional(n *nodeInfo) sinkProof {
	var p sinkProof
	nameBy := n.attrs["name_by"]
	scheme, explicit := "write_time", false
	at := n.rng
	if nameBy != nil {
		scheme, explicit = nameBy.val.Str, nameBy.explicit
		if nameBy.explicit {
			at = nameBy.rng
		}
	}
	if idem := n.attrs["idempotency"]; idem != nil && !explicit {
		scheme, explicit, at = "write_time", true, idem.rng
		if idem.val.Bool {
			scheme = "source_position"
		}
	}
	// A glob numbers records across its files, and which files match can
	// change between runs: its positions do not name the same records on
	// every run, whatever its mode.
	srcHas := rc.src == nil || (rc.src.HasPosition(rc.srcMode) && rc.srcGlob == "")
	srcDesc := "the source"
	if rc.src != nil {
		srcDesc = rc.src.Name
		if rc.srcGlob != "" {
			srcDesc += fmt.Sprintf(" %q", rc.srcGlob)
		}
		if rc.srcMode != "" {
			srcDesc += " in " + rc.srcMode + " mode"
		}
	}
	effective := scheme
	if scheme == "auto" {
		// auto applies to object stores only: a file sink stays on
		// write_time until parts are asked for explicitly. Behind an
		// unnest whose numbering may change on a replay it stays on
		// write_time too (E061), and so does a dead-letter target.
		effective = "write_time"
		if srcHas && rc.src != nil && n.name == "object_store" && rc.unnumbered == "" && !rc.deadLetter {
			effective = "source_position"
		}
	}
	if rc.deadLetter {
		// A dead-letter target is written by time: the runtime refuses
		// source_position there (E062, checkDeadLetterNaming), and auto
		// resolves to write_time.
		switch {
		case scheme == "auto" && !explicit:
			rc.dlqNotes = append(rc.dlqNotes, n.name+" name_by defaults to auto, which resolves to write_time under a dlq")
		case scheme == "auto":
			rc.dlqNotes = append(rc.dlqNotes, n.name+" name_by = auto resolves to write_time under a dlq")
		case scheme == "source_position" && (nameBy == nil || !nameBy.explicit):
			rc.dlqNotes = append(rc.dlqNotes, n.name+" idempotency = true is refused under a dlq (E062)")
		case scheme == "source_position":
			rc.dlqNotes = append(rc.dlqNotes, n.name+" name_by = source_position is refused under a dlq (E062)")
		}
		effective = "write_time"
		rc.resolveNameBy(n, effective)
		rc.claimFilePath(n, at, false)
		p.reasons = []string{fmt.Sprintf("write: dead-letter %s under name_by = write_time names every write anew, so a replay lands twice", n.name)}
		p.missing = fmt.Sprintf("sink write is not idempotent: a dead-letter %s is written by time, so a replay writes the record again", n.name)
		return p
	}
	rc.resolveNameBy(n, effective)
	rc.claimFilePath(n, at, effective == "source_position")
	if effective == "source_position" && rc.unnumbered != "" {
		// Parts are cut and recognised by element position: a record's
		// source position and the element's index among the ones unnest
		// made of it. An index that may name another element on a replay
		// would let the replay skip an element no part holds.
		if !rc.inNamedUnused {
			rc.c.add("E061", at, fmt.Sprintf("%s name_by = source_position in route %s follows unnest %s, whose elements a replay may number differently", n.name, rc.name, rc.unnested),
				fmt.Sprintf("Positional parts name and skip an element by its record's source position and its index among the record's elements, so the index must name the same element on every replay; here %s. Make the array and what decides which elements are live stable, write the elements to a key-addressed sink keyed on meta[\"mqb.id\"], or use name_by = write_time (at-least-once).", rc.unnumbered))
		}
		p.missing = fmt.Sprintf("%s names parts by element position, but a replay may number unnest %s's elements differently: %s", n.name, rc.unnested, rc.unnumbered)
		return p
	}
	if effective == "source_position" {
		rc.claimPartDir(n, at)
		if !srcHas && rc.src != nil && len(rc.src.PositionModes) > 0 {
			// A source with a position in other modes (a file followed in
			// subscribe or group_subscribe mode): its positions restart
			// every run, so the runtime puts a run epoch in the part names.
			// Allowed (spec: "allowed, not rejected"), but at-least-once.
			if !rc.inNamedUnused {
				hint := "Positions restart on every run, so part names carry a run epoch: they stay distinct and in run order, but records re-read after a crash are written again under new names. Read the file in consume mode for positional deduplication, or write to a key-addressed sink."
				if rc.srcGlob != "" {
					hint = "A glob numbers records across its files, and which files match can change between runs, so part names carry a run epoch: records re-read after a crash are written again under new names. For a write a replay cannot repeat, key a key-addressed sink by meta[\"mqb.src.file\"] and meta[\"mqb.src.line\"]."
				}
				if nw := rc.src.NoPositionWith; nw != "" && rc.srcMode == nw {
					hint = fmt.Sprintf("A %s read again after a crash is not read at the same positions, so part names carry a run epoch: records re-read after a crash are written again under new names. Without %s = true the positions repeat; or write to a key-addressed sink keyed on message_id.", nw, nw)
				}
				rc.warn("W020", at, fmt.Sprintf("%s name_by = source_position over %s in route %s cannot recognise a replay: part names carry a run epoch", n.name, srcDesc, rc.name), hint)
			}
			p.reasons = []string{fmt.Sprintf("write: %s names parts by source position with a run epoch, as %s has no position that repeats across runs: a replay after a crash writes the records again under new names", n.name, srcDesc)}
			p.missing = fmt.Sprintf("sink write is not idempotent: %s names parts by source position, but %s restarts its positions every run (run epoch in the names), so a replay writes again", n.name, srcDesc)
			return p
		}
		if !srcHas {
			if !rc.inNamedUnused {
				rc.c.add("E040", at, fmt.Sprintf("%s name_by = source_position in route %s needs a replayable source, but %s has none", n.name, rc.name, srcDesc),
					"Positional names repeat only when the source re-reads records at the same positions: kafka, postgres_cdc, a sql cursor, a file in consume mode. Use a key-addressed sink instead, or name_by = write_time.")
			}
			p.missing = fmt.Sprintf("%s has no replayable position for name_by = source_position", srcDesc)
			return p
		}
		if d := n.attrs["date_partition"]; d != nil && d.explicit && d.val.Bool && !rc.inNamedUnused {
			rc.warn("W005", d.rng, fmt.Sprintf("%s date_partition is ignored under name_by = source_position in route %s", n.name, rc.name),
				"Parts are written flat under the prefix; the name already carries the range.")
		}
		how := "name_by = source_position"
		if scheme == "auto" {
			how = "name_by = auto resolves to source_position"
		}
		p.ok = true
		p.reasons = []string{fmt.Sprintf("write: %s names immutable parts by source position (%s); %s has a replayable position, so a replay rewrites the same names and is skipped", n.name, how, srcDesc)}
		if rc.unnested != "" {
			p.reasons[0] += fmt.Sprintf("; unnest %s numbers each record's elements the same way on every replay, and a part names the elements it holds, so a replay skips those and writes the rest of the record", rc.unnested)
		}
		if n.name == "object_store" {
			p.premises = objectStorePremises(n, p.reasons[0])
		}
		return p
	}
	if n.name == "object_store" && rc.concurrency > 1 && !rc.inNamedUnused {
		hint := "set concurrency = 1"
		if srcHas {
			hint = "use name_by = source_position"
		}
		rc.warn("W004", at, fmt.Sprintf("route %s writes to a write_time object store with concurrency %d", rc.name, rc.concurrency),
			"Names are minted inside the worker pool, so key order becomes arrival order and a replay can reorder updates to one key: "+hint+".")
	}
	p.reasons = []string{fmt.Sprintf("write: %s under name_by = write_time names every write anew, so a replay lands twice", n.name)}
	if rc.unnumbered != "" {
		p.missing = fmt.Sprintf("sink write is not idempotent: %s names by write_time, and positional parts cannot follow unnest %s (E061: %s); key a key-addressed sink on meta[\"mqb.id\"]", n.name, rc.unnested, rc.unnumbered)
	} else if srcHas && rc.src != nil {
		p.missing = fmt.Sprintf("sink write is not idempotent: %s names by write_time; set name_by = source_position (%s has a replayable position)", n.name, srcDesc)
	} else {
		p.missing = fmt.Sprintf("sink write is not idempotent: %s names by write_time and %s has no replayable position; write to a key-addressed sink (SQL ON CONFLICT, Mongo id_field) instead", n.name, srcDesc)
	}
	return p
}

// checkDeadLetterNaming reports E062 when a dlq's target (or a branch
// under it) asks for parts named by source position: name_by =
// source_position, or the deprecated idempotency = true. The runtime writes
// a dead-letter file or object by time and refuses that plan at start-up,
// and a positional dead-letter target could not be trusted anyway: which
// records fail is decided per delivery, so a part named for a range of
// positions would make a replay skip a record that failed only then.
func (rc *routeCtx) checkDeadLetterNaming(n *nodeInfo) {
	if n.kind == nil || n.kind.Attr("name_by") == nil {
		return
	}
	nameBy, idem := n.attrs["name_by"], n.attrs["idempotency"]
	var at diag.Range
	var written string
	switch {
	case nameBy != nil && nameBy.explicit:
		if nameBy.val.Str != "source_position" {
			return
		}
		at, written = nameBy.rng, "name_by = source_position"
	case idem != nil && idem.explicit && idem.val.Type == plan.TBool && idem.val.Bool:
		at, written = idem.rng, "idempotency = true (name_by = source_position)"
	default:
		return
	}
	rc.c.add("E062", at, fmt.Sprintf("dlq target %s in route %s sets %s, but a dead-letter target is written by time", n.name, rc.name, written),
		fmt.Sprintf("A dead-lettered record is written as it fails, and which records fail is decided anew on every delivery (a write can fail once and succeed on the replay), so parts named for a range of source positions would let a replay skip a record that failed only then; mqbc run refuses this plan. Drop the attribute (a dead-letter %s is named by write_time: the dlq is at-least-once), or dead-letter into a key-addressed sink, such as sql with ON CONFLICT on meta[\"mqb.id\"], for an effectively-once dlq.", n.name))
}

// objectStorePremises is what a positional object_store's proof assumes
// of the store: that it refuses a second write of one name and lists what
// it wrote at once. A gs:// bucket (ifGenerationMatch=0) and a file://
// directory (link(2)) do by construction; an S3-compatible server may
// ignore If-None-Match, so an s3:// url, or one whose scheme is known only
// at run time, carries the premise, which the sink checks at start-up by
// writing a probe object twice.
func objectStorePremises(n *nodeInfo, reason string) []premiseAt {
	text, _, ok := urlText(n.attrs["url"])
	if ok && (strings.HasPrefix(text, "gs://") || strings.HasPrefix(text, "file://")) {
		return nil
	}
	text = plan.RedactURLs(text)
	return []premiseAt{{node: n, p: plan.Premise{Kind: plan.PremisePutIfAbsent, When: plan.CheckStartup, Target: text,
		Holds:  fmt.Sprintf("the store at %s refuses a second write of one name made with If-None-Match: * (412) and lists an object as soon as it is written", text),
		Reason: reason}}}
}

// partDirUse is the first sink that writes positional parts into a
// directory or prefix.
type partDirUse struct {
	route string
	rng   diag.Range
}

// claimPartDir reports E051 when another sink of this build already writes
// positional parts into the same directory (file) or prefix (object
// store): each sink skips the position ranges the other's part names
// cover, so it would count records it never wrote as written.
func (rc *routeCtx) claimPartDir(n *nodeInfo, at diag.Range) {
	if rc.inNamedUnused {
		return
	}
	dir := ""
	switch n.name {
	case "file":
		if path := rc.filePath(n); path != "" {
			dir = "file:" + path
		}
	case "object_store":
		if text, _, ok := urlText(n.attrs["url"]); ok && text != "" {
			dir = strings.TrimRight(text, "/")
		}
	}
	if dir == "" {
		return
	}
	prev, ok := rc.c.partDirs[dir]
	if !ok {
		rc.c.partDirs[dir] = partDirUse{route: rc.name, rng: at}
		return
	}
	where := "route " + prev.route
	if prev.route == rc.name {
		where = "another sink of this route"
	}
	rc.c.add("E051", at, fmt.Sprintf("%s in route %s writes positional parts into %s, as %s does (%s)", n.name, rc.name, strings.TrimPrefix(dir, "file:"), where, prev.rng.Start),
		"Each positional sink skips the source positions its directory's part names already cover, so the second writer would count the first one's records as its own and drop its records as already written. Give each route its own directory.")
}

// filePath is a file sink's path, cleaned and relative to the working
// directory as the .mqb file's are ("": none written out).
func (rc *routeCtx) filePath(n *nodeInfo) string {
	a := n.attrs["path"]
	if a == nil || a.val.Str == "" {
		return ""
	}
	path := a.val.Str
	if !filepath.IsAbs(path) && rc.file != nil {
		path = filepath.Join(filepath.Dir(rc.file.Name), path)
	}
	return filepath.Clean(path)
}

// filePathUse is the first file sink that writes a path: as one file
// (write_time) or as a directory of parts (source_position).
type filePathUse struct {
	route string
	rng   diag.Range
	dir   bool
}

// claimFilePath reports E053 when a file sink writes a path that another
// file sink of this build writes the other way: one appends lines to a
// file there, the other makes it a directory of parts. Whichever runs
// first, the other fails at start-up on every run. Two sinks appending to
// one file is allowed (their lines interleave whole), and two writing parts
// into one directory is E051.
func (rc *routeCtx) claimFilePath(n *nodeInfo, at diag.Range, parts bool) {
	// A dlq's target is proven quietly (its own mistakes are reported
	// where it is checked), but its path is claimed there, once.
	if rc.inNamedUnused && !rc.deadLetter {
		return
	}
	rc.checkReadsOwnObjects(n, at)
	if n.name != "file" {
		return
	}
	path := rc.filePath(n)
	if path == "" {
		return
	}
	rc.checkReadsOwnOutput(n, at, path, parts)
	prev, ok := rc.c.filePaths[path]
	if !ok {
		rc.c.filePaths[path] = filePathUse{route: rc.name, rng: at, dir: parts}
		return
	}
	if prev.dir == parts {
		return
	}
	where := "route " + prev.route
	if prev.route == rc.name {
		where = "another sink of this route"
	}
	as := map[bool]string{true: "a directory of positional parts", false: "one file of lines"}
	rc.c.add("E053", at, fmt.Sprintf("file in route %s writes %s as %s, but %s writes it as %s (%s)", rc.name, path, as[parts], where, as[prev.dir], prev.rng.Start),
		"A sink named by write_time appends to one file at its path; one named by source_position makes its path a directory of parts. One path cannot be both: whichever sink starts second fails at start-up on every run. Give each sink its own path.")
}

// checkReadsOwnOutput reports E065 when a file sink of the route (its
// sink, a branch or its dlq's target) writes where the route's own file
// source reads: the file it reads, or a file in the directory or glob it
// reads (a directory of parts, when the source reads a directory). The
// route would read its own records back: in a follow mode without end,
// in consume mode again on every run, its input growing each time.
func (rc *routeCtx) checkReadsOwnOutput(n *nodeInfo, at diag.Range, path string, parts bool) {
	if len(rc.nodes) == 0 || rc.nodes[0].role != plan.RoleSource || rc.nodes[0].name != "file" {
		return
	}
	src := rc.filePath(rc.nodes[0])
	if src == "" {
		return
	}
	raw := rc.nodes[0].attrs["path"].val.Str
	reads := ""
	switch {
	case !stdlib.FilePathNamesMany(raw):
		if path == src {
			reads = "the file it reads"
		}
	case strings.HasSuffix(raw, "/"): // a directory: every file in it
		if (!parts && filepath.Dir(path) == src) || (parts && path == src) {
			reads = "the directory it reads, " + raw
		}
	default: // a glob
		if ok, _ := filepath.Match(src, path); ok && !parts {
			reads = "a file its glob " + raw + " matches"
		}
	}
	if reads == "" {
		return
	}
	what := map[bool]string{true: "positional parts into " + path, false: path}[parts]
	rc.c.add("E065", at, fmt.Sprintf("file in route %s writes %s, %s: the route would read its own records back", rc.name, what, reads),
		"A route whose file sink (or dlq, or branch) writes where its file source reads takes its own output as input: in subscribe or group_subscribe mode it reads what it writes without end, and in consume mode every run reads the last run's output again, the input growing each time. Write somewhere the source does not read.")
}

// checkReadsOwnObjects is checkReadsOwnOutput for an object_store sink
// over an object_store source: E065 when the sink writes under the
// prefix the source lists (the prefix itself, or a longer one below it).
func (rc *routeCtx) checkReadsOwnObjects(n *nodeInfo, at diag.Range) {
	if n.name != "object_store" || len(rc.nodes) == 0 || rc.nodes[0].role != plan.RoleSource || rc.nodes[0].name != "object_store" {
		return
	}
	src, srcStatic, ok := urlText(rc.nodes[0].attrs["url"])
	dst, dstStatic, ok2 := urlText(n.attrs["url"])
	if !ok || !ok2 || !srcStatic || !dstStatic || src == "" {
		return
	}
	s, d := strings.TrimRight(src, "/"), strings.TrimRight(dst, "/")
	if d != s && !strings.HasPrefix(d, s+"/") {
		return
	}
	rc.c.add("E065", at, fmt.Sprintf("object_store in route %s writes under %s, which its object_store source lists (%s): the route would read its own records back", rc.name, dst, src),
		"A route whose object_store sink (or dlq, or branch) writes under the prefix its object_store source lists takes its own output as input: the source reads every object under its prefix, those the route wrote included. Write under a prefix the source does not list.")
}

// resolveNameBy writes the effective naming scheme into the plan (auto and
// the deprecated idempotency resolved), so the runtime reads one attribute,
// and turns the source's source_metadata on under source_position, as the
// positional path needs the mqb.src.* keys.
func (rc *routeCtx) resolveNameBy(n *nodeInfo, effective string) {
	if a := n.attrs["name_by"]; a != nil {
		a.val.Str = effective
	} else {
		n.attrs["name_by"] = &attrInfo{val: plan.Value{Type: plan.TEnum, Str: effective}, stab: stableValue}
	}
	if effective != "source_position" || rc.inNamedUnused || len(rc.nodes) == 0 || rc.nodes[0].role != plan.RoleSource {
		return
	}
	if sm := rc.nodes[0].attrs["source_metadata"]; sm != nil {
		sm.val.Bool = true
	}
}

func boolAttr(n *nodeInfo, name string) bool {
	a := n.attrs[name]
	return a != nil && a.val.Type == plan.TBool && a.val.Bool
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if strings.EqualFold(x, s) {
			return i
		}
	}
	return -1
}

func templateText(parts []plan.Part) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, p := range parts {
		if p.Expr != "" {
			b.WriteString("${" + p.Expr + "}")
		} else {
			b.WriteString(p.Lit)
		}
	}
	b.WriteByte('"')
	return b.String()
}
