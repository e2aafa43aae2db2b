package compiler

import "fmt"

// checkCDCSnapshot refuses what a postgres_cdc snapshot cannot run with
// (the source refuses them at start-up too): without checkpoint_store
// nothing holds how far the snapshot was read and committed, and a
// temporary slot disappears at a crash with the changes since its start.
func (rc *routeCtx) checkCDCSnapshot(n *nodeInfo) {
	snap := n.attrs["snapshot"]
	if snap == nil || !boolAttr(n, "snapshot") {
		return
	}
	if a := n.attrs["checkpoint_store"]; a == nil || a.val.Str == "" {
		rc.c.add("E022", snap.rng, fmt.Sprintf("postgres_cdc%s: snapshot = true needs checkpoint_store", rc.where()),
			"The slot holds the stream's position, not how far the snapshot was read: set checkpoint_store = \"pebble://.mqb/state\".")
	}
	if a := n.attrs["temporary_slot"]; a != nil && boolAttr(n, "temporary_slot") {
		rc.c.add("E022", a.rng, fmt.Sprintf("postgres_cdc%s: snapshot = true cannot use a temporary slot", rc.where()),
			"A temporary slot disappears at a crash, and with it the changes since the snapshot's start: use a permanent slot.")
	}
}
