package compiler

import (
	"fmt"

	"github.com/mqb-dev/mqb/plan"
)

// outboxDedups weakens a route the runtime runs, or may run, under the
// transactional outbox when a dedup step's memory is part of what the
// sink ends up holding. The outbox commits the source position in the
// sink's transaction; the dedup step promotes its keys after that write
// and makes them durable with the checkpoint, later. A crash in between
// resumes past records whose keys the dedup no longer remembers, so a
// later repeat of such a key passes the dedup and is written again: the
// route is at-least-once.
//
// The one dedup left out is the one the sink makes redundant
// (elidableDedup: the sink's conflict clause absorbs every repeat of the
// dedup's key and keeps the first row, with nothing between them), which
// the compiler takes out of the route; without it the outbox proof needs
// no memory at all.
func (rc *routeCtx) outboxDedups(g *guaranteeProof, handler, sink *nodeInfo, sp sinkProof, mayOutbox bool) {
	absorbed := rc.elidableDedup(handler, sink, sp)
	under := "runs under the transactional outbox"
	if mayOutbox {
		under = "may run under the transactional outbox (its sql urls may render to one database)"
	}
	for _, d := range rc.dedups {
		if d == absorbed {
			continue
		}
		key := "its key"
		if k := d.attrs["key"]; k != nil {
			key = k.val.Expr
		}
		g.weaken(plan.AtLeastOnce, fmt.Sprintf("dedup on %s forgets keys across a crash: the route %s, which commits the source position in the sink's transaction, while the dedup step's memory of %s is committed after that write, with the checkpoint; a crash in between resumes past records whose keys the dedup no longer remembers, so a later repeat of such a key passes it and is written again. A conflict clause in the sink that absorbs repeats of that key (ON CONFLICT (k) DO NOTHING on the column it binds) makes the dedup unneeded", key, under, key))
	}
}
