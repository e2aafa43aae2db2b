package sql

import (
	"context"
	"errors"
	"io"

	"github.com/mqb-dev/mqb/runtime"
)

// Split writes bound as they are copied. A write binds its records into
// rows before it sends any, and the server waits meanwhile: on a file →
// PostgreSQL upsert about a tenth of the run. Where the rows go in read
// order (concurrency 1, or no key to order them by), a split write
// (pgsplit.go) instead starts its COPY at once and binds the records as
// COPY reads them: each read binds the next records, places each row in
// its part (pgSplit.place, the same choice parts makes for a whole
// batch) and renders the rows of part 2, so the server parses the first
// rows while the sink binds the next. Parts 1 and 3 follow in one
// pipeline with COMMIT, as before. When COPY stops early (a conflict),
// the records it did not read are bound after it, and the batch goes to
// the staged statement whole, as before. Where the rows go in key order
// (concurrency above 1 with a key: lockorder.go) they are all bound
// first, to be sorted.

// errNoRows: every record of a streamed write was refused as it was
// bound; nothing is written.
var errNoRows = errors.New("no row to write")

// splitReader is a split write's COPY data, bound as COPY reads it.
type splitReader struct {
	b    *rowBinder
	sp   *pgSplit
	recs []*runtime.Record
	next int // the next record to bind
	buf  []byte
	off  int
}

func (r *splitReader) Read(p []byte) (int, error) {
	// What the last read left over, then rows until p is full: each read
	// a full CopyData message.
	r.buf, r.off = append(r.buf[:0], r.buf[r.off:]...), 0
	if len(r.buf) < len(p) && r.next < len(r.recs) {
		sc := r.b.sc
		r.sp.mu.Lock()
		for len(r.buf) < len(p) && r.next < len(r.recs) {
			i := r.next
			r.next++
			if r.b.bind(i, r.recs[i]) && r.sp.place(sc, sc.rows, i) {
				r.buf = appendCopyRow(r.buf, sc.rows[i])
			}
		}
		r.sp.mu.Unlock()
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.off = n
	return n, nil
}

// finish binds the records COPY did not read.
func (r *splitReader) finish() {
	for ; r.next < len(r.recs); r.next++ {
		r.b.bind(r.next, r.recs[r.next])
	}
}

// splitStreamPG writes recs as a split write whose COPY binds them as it
// reads. Whatever it returns, every record is bound into sc (its rows
// and live) or refused. done is false when the write did not go through
// (COPY or a statement refused a row: nothing of the batch is written,
// and the staged statement writes it); an error is the connection's.
func (s *sqlServerSink) splitStreamPG(ctx context.Context, c *pgConn, sc *pgScratch, recs []*runtime.Record) (absorbed int64, done bool, err error) {
	rd := &splitReader{b: s.binder(sc, len(recs)), sp: s.split, recs: recs, buf: sc.copy.buf[:0]}
	defer func() { sc.copy.buf = rd.buf[:0] }()
	s.split.startParts(sc)
	if err := s.stageReady(ctx, c); err != nil {
		rd.finish()
		return 0, false, nil // the staged write says what it means
	}
	absorbed, err = s.streamTx(ctx, c, sc, rd, recs)
	rd.finish()
	if errors.Is(err, errNoRows) {
		_, err := c.conn.Exec(ctx, "ROLLBACK").ReadAll()
		return 0, err == nil, err
	}
	if err != nil {
		return 0, false, s.splitFailed(ctx, c, err)
	}
	s.split.succeeded()
	return absorbed, true, nil
}

// streamTx runs a streamed split write's transaction: BEGIN and the COPY
// of part 2 in one query, binding as it goes, then parts 1 and 3, the
// outbox position and COMMIT in one pipeline. Any error leaves the
// transaction for the caller to roll back.
func (s *sqlServerSink) streamTx(ctx context.Context, c *pgConn, sc *pgScratch, rd *splitReader, recs []*runtime.Record) (int64, error) {
	if _, err := c.conn.CopyFrom(ctx, rd, "BEGIN; "+s.split.copySQL); err != nil {
		return 0, err
	}
	if len(sc.live) == 0 {
		return 0, errNoRows
	}
	sc.before = append(sc.before, sc.after...)
	return s.stagedPipeline(ctx, c, recs, sc.rows, sc.before, false, true)
}
