package sql

import (
	"context"
	"errors"
	"iter"
)

// Part 1 aside: in a streamed split write (pgstream.go) the server runs
// the COPY of part 2 and then part 1, one after the other on one
// connection, while the second core has little to do: on a file →
// PostgreSQL upsert with a tenth of its rows repeating an earlier key,
// part 1 is about an eighth of the run. Where part 1 can run beside the
// COPY, it runs on a second connection, in a transaction of its own,
// chunk by chunk as the COPY's reads place its rows, and commits before
// the main transaction sends part 3, the outbox position and COMMIT.
//
// Only where that leaves the table as the one transaction would, and
// where neither transaction can wait for the other (an allow-list,
// pgSplit.aside, read from the catalog):
//   - ON CONFLICT DO NOTHING: a row written twice (part 1 committed, the
//     main transaction then failed and the batch written again) is
//     absorbed the second time, as a replay is; DO UPDATE would apply it
//     twice;
//   - an exact key (pgSplit.exact): part 1 shares no key with parts 2
//     and 3, so no row of one waits for an uncommitted row of the other;
//   - the conflict target's index the table's only unique or exclusion
//     index: a conflict on another would make one connection wait for
//     the other's transaction, which waits for it in turn;
//   - no outbox position (a route from an sql source keeps its cursor in
//     the main transaction, which must not commit without part 1's rows,
//     and need not: the position makes its replays exact);
//   - concurrency 1: one write in flight, so this sink's own writes wait
//     for no other of its writes (for other writers, see below).
//
// Neither transaction waits for the other, but with other writers to the
// table (another route, another instance of this one) a wait can close a
// cycle through the sink itself, which the server cannot see: the COPY
// waits for a row of another writer's part 1, which stays open until
// that writer's COPY ends, which waits for a row of this write's part 1,
// which stays open until this COPY ends; or part 1 waits for another
// writer's COPY, whose writer waits for its own part 1, which waits for
// this write's COPY, which waits here for part 1. Every such cycle holds
// a lock wait of a COPY or a part 1, so both transactions wait for no
// lock longer than asideLockWait: past it, the split write fails, the
// main transaction is rolled back and the staged statement writes the
// batch on one connection, where the server sees any deadlock.
//
// Part 1's transaction commits with synchronous_commit off, so its
// COMMIT does not wait for the disk: the main transaction's COMMIT comes
// after it in the write-ahead log and waits for both. Only a transaction
// that wrote something waits for the disk at its COMMIT, so where the
// COPY wrote no row (every key of the batch is one the sink wrote
// before), part 1 commits with synchronous_commit on. Write returns only
// after both committed; if part 1 fails (a row refused), the main
// transaction is rolled back and the staged statement writes the batch;
// if the main transaction fails after part 1 committed, Write returns
// the error and the batch is written again, part 1's rows absorbed.

// asideSettings are part 1's transaction's: its COMMIT does not wait for
// the disk, and it waits for no lock longer than asideLockWait.
const asideSettings = "SELECT set_config('synchronous_commit', 'off', true), set_config('lock_timeout', '" + asideLockWait + "', true)"

// asideLockWait is the longest part 1, and the main transaction of a
// write that may run it, wait for a lock.
const asideLockWait = "200ms"

// asideLockLimit sets asideLockWait for the main transaction, after its
// BEGIN.
const asideLockLimit = "SET LOCAL lock_timeout = '" + asideLockWait + "'; "

// asideWrite is part 1 of one streamed split write, run on a second
// connection once it fills a chunk (a smaller part 1 goes with part 3,
// as it would without).
type asideWrite struct {
	s   *sqlServerSink
	ctx context.Context
	on  bool // started: the rows handed over are the aside's to write
	off bool // could not start: part 1 goes with part 3

	chunks chan [][][]byte // part 1's rows, a chunk at a time
	quit   chan struct{}   // closed when the aside stops reading chunks
	end    string          // how part 1's transaction ends, set by finish before chunks closes
	result chan asideResult
	sent   int // rows of sc.before handed over
}

type asideResult struct {
	absorbed int64
	err      error
}

// errAsideDropped: the main transaction failed, so part 1's was rolled
// back.
var errAsideDropped = errors.New("part 1 rolled back with its write")

// newAside is a streamed split write's part 1, to run beside its COPY
// once it fills a chunk: nil where the split does not allow it.
func (s *sqlServerSink) newAside(ctx context.Context) *asideWrite {
	if !s.split.aside || s.outboxRoute != "" {
		return nil
	}
	return &asideWrite{s: s, ctx: ctx}
}

// start takes a connection and starts part 1's transaction on it; false
// when it cannot.
func (a *asideWrite) start() bool {
	s, ctx := a.s, a.ctx
	c, err := s.pg.get(ctx)
	if err != nil {
		return false
	}
	if err := s.stageReady(ctx, c); err != nil {
		s.pg.put(ctx, c)
		return false
	}
	a.chunks, a.quit, a.result = make(chan [][][]byte, 4), make(chan struct{}), make(chan asideResult, 1)
	go func() {
		absorbed, err := s.chunkPipeline(ctx, c, nil, a.rows(), pipeEnds{begin: true, lazy: true})
		close(a.quit)
		for range a.chunks { // until finish closes it
		}
		end := a.end // chunks is closed: finish set it
		switch {
		case err != nil:
			end = "ROLLBACK"
		case end == "ROLLBACK":
			err = errAsideDropped
		}
		if _, eerr := c.conn.Exec(ctx, end).ReadAll(); eerr != nil && err == nil {
			err = eerr
		}
		s.pg.put(ctx, c) // before the write returns: the next one takes it
		a.result <- asideResult{absorbed, err}
	}()
	a.on = true
	return true
}

// rows yields the chunks handed over until the channel closes.
func (a *asideWrite) rows() iter.Seq2[[][][]byte, []int] {
	return func(yield func([][][]byte, []int) bool) {
		idx := make([]int, 0, stageChunk)
		for ch := range a.chunks {
			for len(idx) < len(ch) {
				idx = append(idx, len(idx))
			}
			if !yield(ch, idx[:len(ch)]) {
				return
			}
		}
	}
}

// hand gives the aside the rows of sc.before it has not had, when they
// fill a chunk or, with all, every one, starting it at the first full
// chunk; sp.mu is held or the COPY is over.
func (a *asideWrite) hand(sc *pgScratch, all bool) {
	if a.off || (!a.on && (all || len(sc.before) < stageChunk)) {
		return
	}
	if !a.on && !a.start() {
		a.off = true
		return
	}
	for len(sc.before)-a.sent >= stageChunk || (all && len(sc.before) > a.sent) {
		n := min(len(sc.before)-a.sent, stageChunk)
		ch := make([][][]byte, n)
		for k, i := range sc.before[a.sent : a.sent+n] {
			ch[k] = sc.rows[i]
		}
		a.sent += n
		select {
		case a.chunks <- ch:
		case <-a.quit:
			return
		}
	}
}

// finish hands over the rest of part 1 and waits for its transaction:
// committed when keep is set (waiting for the disk when the COPY wrote
// no row), rolled back otherwise. ran is false when the aside never
// started: part 1 is all in sc.before still.
func (a *asideWrite) finish(sc *pgScratch, keep bool) (absorbed int64, ran bool, err error) {
	if !a.on {
		return 0, false, nil
	}
	if keep {
		a.hand(sc, true)
	}
	switch {
	case !keep:
		a.end = "ROLLBACK"
	case len(sc.copied) == 0: // the main COMMIT wrote nothing: it would not flush
		a.end = "SET LOCAL synchronous_commit = on; COMMIT"
	default:
		a.end = "COMMIT"
	}
	close(a.chunks)
	r := <-a.result
	return r.absorbed, true, r.err
}
