package runtime

import "sync"

// turnGate lets batches through one section in the order they were read,
// whatever the order the processing workers reach it in. A dedup step runs
// behind one: with concurrency > 1 two records of one key in different
// batches would otherwise race for the reservation, and which of them is
// kept would depend on scheduling — a clean run and a crashed one could
// keep different records of a key. Behind the gate the first record of a
// key in source order is the one kept, in every run.
//
// Every batch the reader hands on has a sequence number (batch.seq) and
// must pass every gate once, whether its steps ran, failed or were skipped
// (route.passTurns); pass is idempotent and may come out of order. After a
// failure release opens the gate for good: nobody waits on a batch that
// will never come.
type turnGate struct {
	mu     sync.Mutex
	cond   sync.Cond
	next   uint64          // the sequence number whose turn it is
	passed map[uint64]bool // passed out of turn, ahead of next
	open   bool
}

func newTurnGate() *turnGate {
	g := &turnGate{passed: map[uint64]bool{}}
	g.cond.L = &g.mu
	return g
}

// wait blocks until it is seq's turn (or the gate is released).
func (g *turnGate) wait(seq uint64) {
	g.mu.Lock()
	for g.next != seq && !g.open && seq > g.next {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// pass records that seq went through (or will never come to the gate).
func (g *turnGate) pass(seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if seq < g.next {
		return
	}
	g.passed[seq] = true
	for g.passed[g.next] {
		delete(g.passed, g.next)
		g.next++
	}
	g.cond.Broadcast()
}

// release lets every waiter through, now and later.
func (g *turnGate) release() {
	g.mu.Lock()
	g.open = true
	g.cond.Broadcast()
	g.mu.Unlock()
}
