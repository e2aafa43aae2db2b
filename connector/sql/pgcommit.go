package sql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/plan"
)

// Commit on sync: a bulk_copy sink on a route without a dedup step (the
// engine calls SyncOnCommit only there, runtime/commitsync.go) loads each
// write with one COPY under a savepoint inside a transaction it keeps
// open, and commits that transaction when the route commits (Sync): one
// commit, and one flush of the server's WAL, per commit interval instead
// of one per write. The engine calls Sync after taking the acked position
// and before saving it, so the position never passes a row that is not
// committed; a crash before the commit loses the open transaction and the
// position with it, and the rerun writes those rows again.
//
// A row COPY refuses rolls the COPY back to its savepoint; the
// transaction, holding the earlier writes, is committed and the batch
// goes row by row as without commit on sync (writePGRows), each refused
// row dead-lettered alone. Committing early only makes rows durable
// sooner.
//
// Losing the open transaction (the server restarts, the connection
// drops) loses rows whose writes returned and were acked: no retry can
// bring them back, so the sink fails for good, every later Write and
// Sync with it, and the route stops without committing past them; the
// rerun resumes at the last committed position. A connection lost while
// its transaction holds no acked write is retryable as usual.
//
// A route whose sink commits the source's cursor in its own transaction
// (the outbox) keeps one transaction per write: it is effectively-once
// already, and its position lives in the sink's transactions.

// openTx is a connection of the sink with the transaction it keeps open.
// A write holds mu while it uses it; Sync takes mu to commit.
type openTx struct {
	mu sync.Mutex
	c  *pgConn
	// open: BEGIN was sent; savepoint: a write's savepoint is to be
	// released (with the next write's SAVEPOINT, or by the COMMIT);
	// dirty: the transaction holds rows of writes that returned.
	open, savepoint, dirty bool
	// sp numbers the last write's savepoint (savepointName); the write
	// in progress sets sp+1.
	sp uint64
	// gone: the connection was dropped and left the sink's list.
	gone bool
}

// errTxLost wraps a failure that left an open transaction unusable: the
// connection is gone, or it could not roll back to the write's savepoint.
type errTxLost struct{ err error }

func (e *errTxLost) Error() string { return e.err.Error() }
func (e *errTxLost) Unwrap() error { return e.err }

const pgCopySavepoint = "mqb_copy"

// savepointName is the name of write n's savepoint: each write's is new,
// so a rollback to it fails, rather than reaching an earlier write's,
// when the write's SAVEPOINT did not run (see writeStatements).
func savepointName(n uint64) string {
	return pgCopySavepoint + "_" + strconv.FormatUint(n, 10)
}

// SyncOnCommit turns commit on sync on (see runtime.CommitSyncSink): for
// a bulk_copy sink on PostgreSQL, outside the outbox; other sinks commit
// each write as before.
func (s *sqlSink) SyncOnCommit() {
	if s.server != nil {
		s.server.syncOnCommit()
	}
}

// ReleasesRecords says the sink keeps nothing of a record once Write
// returned (see runtime.ReleasingSink), so the route reuses its batches
// instead of allocating each one's records and payloads anew. A SQLite
// sink binds each value into its statement, which copies it, and clears
// its bound values after each batch; a PostgreSQL sink renders rows into
// buffers of the write's own, and a binary COPY's reader is stopped before
// Write returns (binaryCopyReader.stop). MySQL sinks are not checked for
// it and say false.
func (s *sqlSink) ReleasesRecords() bool {
	return s.server == nil || s.server.dialect == dialectPostgres
}

var _ runtime.ReleasingSink = (*sqlSink)(nil)

// Sync commits the open transactions (see runtime.CommitSyncSink).
func (s *sqlSink) Sync() error {
	if s.server == nil {
		return nil
	}
	return s.server.sync()
}

func (s *sqlServerSink) syncOnCommit() {
	if s.dialect == dialectPostgres && s.copySQL != "" && s.outboxRoute == "" {
		s.onCommit = true
	}
}

// takeTx returns an open transaction for a write, locked: an idle one, or
// a fresh connection. After a lost transaction it returns that error.
func (s *sqlServerSink) takeTx(ctx context.Context) (*openTx, error) {
	s.txMu.Lock()
	if err := s.txErr; err != nil {
		s.txMu.Unlock()
		return nil, err
	}
	var t *openTx
	if n := len(s.txIdle); n > 0 {
		t = s.txIdle[n-1]
		s.txIdle = s.txIdle[:n-1]
	}
	s.txMu.Unlock()
	if t == nil {
		c, err := s.pg.get(ctx)
		if err != nil {
			if pe, ok := err.(*pgPrepareError); ok {
				return nil, fmt.Errorf("route %s: sql sink (%s): prepare %q: %w", s.route, s.url, s.query, pe.err)
			}
			return nil, s.batchError("connect", err)
		}
		t = &openTx{c: c}
		s.txMu.Lock()
		s.txs = append(s.txs, t)
		s.txMu.Unlock()
	}
	t.mu.Lock()
	return t, nil
}

// releaseTx hands t back for the next write and unlocks it.
func (s *sqlServerSink) releaseTx(t *openTx) {
	if !t.gone && !t.open && !t.c.conn.IsClosed() && t.c.conn.TxStatus() != 'I' {
		// The row by row writes failed inside their own transaction.
		if _, err := t.c.conn.Exec(context.Background(), "ROLLBACK").ReadAll(); err != nil {
			t.c.conn.Close(context.Background())
		}
	}
	if !t.gone && (t.c.conn.IsClosed() || t.c.conn.IsBusy()) {
		s.lostTx(t, "connection", errors.New("closed")) // for good if it held acked rows
	}
	gone := t.gone
	t.mu.Unlock()
	if !gone {
		s.txMu.Lock()
		s.txIdle = append(s.txIdle, t)
		s.txMu.Unlock()
	}
}

// dropTx closes t's connection, rolling back whatever it holds, and
// takes it out of the sink's list. t is locked.
func (s *sqlServerSink) dropTx(t *openTx) {
	t.c.conn.Close(context.Background())
	t.gone = true
	s.txMu.Lock()
	s.txs = slices.DeleteFunc(s.txs, func(o *openTx) bool { return o == t })
	s.txIdle = slices.DeleteFunc(s.txIdle, func(o *openTx) bool { return o == t }) // Sync dropped it while idle
	s.txMu.Unlock()
}

// lostTx handles a failure that left t unusable: the connection is
// dropped, and when the transaction held acked rows the sink fails for
// good (see the top of this file).
func (s *sqlServerSink) lostTx(t *openTx, op string, err error) error {
	dirty := t.dirty
	s.dropTx(t)
	if !dirty {
		return s.batchError(op, err)
	}
	e := fmt.Errorf("route %s: sql sink (%s): %s: %s: the open transaction, holding the rows written since the route's last commit, is lost; "+
		"the route stops without committing past them, and a rerun resumes at the last commit and writes them again",
		s.route, s.url, op, plan.RedactURLs(err.Error()))
	s.txMu.Lock()
	if s.txErr == nil {
		s.txErr = e
	}
	e = s.txErr
	s.txMu.Unlock()
	return e
}

// writeStatements is what a write sends before its COPY, in the same
// query: BEGIN when t has no transaction open, the release of the last
// write's savepoint, and this write's. No round trip of their own: the
// server runs them, then the COPY, whose rows pgx streams right behind
// the query. Should one of them fail, the server skips the rest of the
// query, the COPY with it, and ignores the rows that follow; the
// rollback to this write's savepoint then fails too, as there is none,
// and the transaction is given up as lost (abortWrite).
func writeStatements(t *openTx) string {
	q := "SAVEPOINT " + savepointName(t.sp+1) + "; "
	switch {
	case !t.open:
		q = "BEGIN; " + q
	case t.savepoint:
		q = "RELEASE SAVEPOINT " + savepointName(t.sp) + "; " + q
	}
	return q
}

// wrote records that a write's statements and COPY ran.
func (t *openTx) wrote() {
	t.open, t.savepoint, t.sp = true, true, t.sp+1
}

// abortWrite rolls the transaction back to the write's savepoint after err;
// the error says whether the transaction survived.
func (s *sqlServerSink) abortWrite(ctx context.Context, t *openTx, err error) error {
	if t.c.conn.IsClosed() {
		return &errTxLost{err}
	}
	if _, rerr := t.c.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepointName(t.sp+1)).ReadAll(); rerr != nil {
		return &errTxLost{fmt.Errorf("%w (then rollback to savepoint: %v)", err, rerr)}
	}
	// The write's statements ran and its savepoint stands, rolled back
	// to: the next write releases it.
	t.wrote()
	return err
}

// commitTx commits t's transaction, if open. t is locked.
func (s *sqlServerSink) commitTx(ctx context.Context, t *openTx) error {
	if t.gone || !t.open {
		return nil
	}
	res, err := t.c.conn.Exec(ctx, "COMMIT").ReadAll()
	if err == nil && (len(res) != 1 || res[0].CommandTag.String() != "COMMIT") {
		// An aborted transaction ends in ROLLBACK without an error.
		err = errors.New("the server rolled the transaction back")
	}
	if err != nil {
		return s.lostTx(t, "commit", err)
	}
	t.open, t.savepoint, t.dirty = false, false, false
	return nil
}

// sync commits every open transaction. A write in progress on one is
// waited for and committed with it.
func (s *sqlServerSink) sync() error {
	if !s.onCommit {
		return nil
	}
	s.txMu.Lock()
	if err := s.txErr; err != nil {
		s.txMu.Unlock()
		return err
	}
	txs := slices.Clone(s.txs)
	s.txMu.Unlock()
	for _, t := range txs {
		t.mu.Lock()
		dirty := t.dirty
		err := s.commitTx(context.Background(), t)
		t.mu.Unlock()
		if err != nil && dirty {
			return err
		}
		// A transaction holding no acked row that failed to commit is
		// dropped: nothing was lost.
	}
	// A write that was under way when Sync began may have lost its
	// transaction, with the acked rows of the writes before it, while
	// Sync waited for it: the transaction is gone, committing it was a
	// no-op, and the loss is the sink's error.
	s.txMu.Lock()
	defer s.txMu.Unlock()
	return s.txErr
}

// closeTxs closes the open transactions' connections: what they hold was
// not committed by the route, whose rerun writes it again.
func (s *sqlServerSink) closeTxs() {
	s.txMu.Lock()
	txs := s.txs
	s.txs, s.txIdle = nil, nil
	s.txMu.Unlock()
	for _, t := range txs {
		t.mu.Lock()
		t.c.conn.Close(context.Background())
		t.gone = true
		t.mu.Unlock()
	}
}

// writeCopyOnCommit loads recs into an open transaction: by binary COPY,
// else text COPY, each under a savepoint; a refused row commits the
// transaction and sends the batch row by row.
func (s *sqlServerSink) writeCopyOnCommit(ctx context.Context, recs []*runtime.Record) error {
	t, err := s.takeTx(ctx)
	if err != nil {
		return err
	}
	defer s.releaseTx(t)
	fail := func(op string, err error) error {
		var lost *errTxLost
		if errors.As(err, &lost) {
			return s.lostTx(t, op, lost.err)
		}
		return s.batchError(op, err) // the transaction is intact
	}
	written := func(live []int) error {
		t.dirty = true
		if s.outcome {
			for _, i := range live {
				setOutcome(recs[i], true)
			}
		}
		return nil
	}

	textCopy := true
	if s.copyOIDs != nil {
		err := s.copyBinaryPG(ctx, t.c, recs, t)
		switch {
		case err == nil:
			var live []int // only report_outcome reads it
			for i, r := range recs {
				if s.outcome && r.Refused() == "" {
					live = append(live, i)
				}
			}
			return written(live)
		case errors.Is(err, errBinaryMisfit): // the text COPY below
		case errors.As(err, new(*errTxLost)) || classifyPG(err) != sqlRowLevel:
			return fail("copy", err)
		default:
			textCopy = false // it would refuse the row too: the inserts find it
		}
	}
	sc := s.scratch.get()
	defer s.scratch.put(sc)
	rows, live := s.pgRows(sc, recs)
	if len(live) == 0 {
		return nil
	}
	if textCopy {
		err := s.copyIn(ctx, t.c, sc.copyOf(rows, live), s.copySQL, 0, t)
		if err == nil {
			return written(live)
		}
		if errors.As(err, new(*errTxLost)) || classifyPG(err) != sqlRowLevel {
			return fail("copy", err)
		}
	}
	// A refused row: commit what the transaction holds, then find the row
	// with the inserts, in transactions of their own.
	if err := s.commitTx(ctx, t); err != nil {
		return err
	}
	absorbed, err := s.writePGRows(ctx, t.c, recs, rows, live)
	if err != nil {
		return err
	}
	s.absorb.add(absorbed)
	return nil
}

var _ runtime.CommitSyncSink = (*sqlSink)(nil)
