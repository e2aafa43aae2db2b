package runtime

import "fmt"

// A sink whose writes are durable only once fsynced (a file) can leave
// the fsync to the route's commit: one per commit interval instead of one
// per group of batches, with the reading, the writing and the disk's
// flushing overlapped (see CommitSyncSink).

// syncOnCommit decides, once the route is built, which of its sinks make
// their writes durable in the commit rather than in each write (rt.syncs).
// Only the route's own sink and its DLQ's, and only on a route where
// nothing else takes a delivered record as durable before the commit: a
// dedup step promotes a record's key once its write returns, and its
// store may make that durable on its own before the sink's fsync; after a
// machine crash the key would then drop the replayed record whose line
// was lost. A handler or a structural output wraps the sink it writes to,
// and is not a CommitSyncSink itself: those keep syncing every write.
func (rt *route) syncOnCommit() {
	if len(rt.dedupStores) > 0 {
		return
	}
	for _, s := range []sink{rt.sink, rt.dlq} {
		if cs, ok := s.(CommitSyncSink); ok {
			cs.SyncOnCommit()
			rt.syncs = append(rt.syncs, cs)
		}
	}
}

// syncSinks makes every write of the sinks that sync on commit durable:
// the commit calls it after taking the acked position and before saving
// it.
func (rt *route) syncSinks() error {
	for _, s := range rt.syncs {
		if err := s.Sync(); err != nil {
			return fmt.Errorf("route %s: %w", rt.name, err)
		}
	}
	return nil
}

// syncsOnCommit reports whether s is one of the route's sinks that sync
// in the commit.
func (rt *route) syncsOnCommit(s sink) bool {
	for _, cs := range rt.syncs {
		if sink(cs) == s {
			return true
		}
	}
	return false
}
