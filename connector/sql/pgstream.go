package sql

import (
	"context"
	"errors"

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
// pipeline with COMMIT, as before (or part 1 beside the COPY: pgaside.go),
// so only where the key is exact (pgSplit.exact): part 1 is known only
// once COPY has read the batch. When COPY stops early (a conflict), the
// records it did not read are bound after it, and the batch goes to the
// staged statement whole, as before. Where the rows go in key order
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
	i    int // the next record to bind
	text *copyText
}

func (r *splitReader) Read(p []byte) (int, error) {
	r.sp.mu.Lock()
	defer r.sp.mu.Unlock()
	n, err := r.text.read(p, r.next)
	if r.b.sc.inexact {
		return 0, errInexactKey // COPY stops: the staged statement writes the batch
	}
	return n, err
}

// next binds the next record and places its row, rendering it onto buf
// when it goes by COPY; false when no record is left. sp.mu is held.
func (r *splitReader) next(buf []byte) ([]byte, bool) {
	if r.i == len(r.recs) {
		return buf, false
	}
	i, sc := r.i, r.b.sc
	r.i++
	if r.b.bind(i, r.recs[i]) && r.sp.place(sc, sc.rows, i) {
		buf = appendCopyRow(buf, sc.rows[i])
	} else if sc.aside != nil {
		sc.aside.hand(sc, false)
	}
	return buf, true
}

// finish binds the records COPY did not read.
func (r *splitReader) finish() {
	for ; r.i < len(r.recs); r.i++ {
		r.b.bind(r.i, r.recs[r.i])
	}
}

// splitStreamPG writes recs as a split write whose COPY binds them as it
// reads. Whatever it returns, every record is bound into sc (its rows
// and live) or refused. done is false when the write did not go through
// (COPY or a statement refused a row: nothing of the batch is written,
// and the staged statement writes it); an error is the connection's.
func (s *sqlServerSink) splitStreamPG(ctx context.Context, c *pgConn, sc *pgScratch, recs []*runtime.Record) (absorbed int64, done bool, err error) {
	rd := &splitReader{b: s.binder(sc, len(recs)), sp: s.split, recs: recs, text: sc.copyText()}
	s.split.startParts(sc)
	if err := s.stageReady(ctx, c); err != nil {
		rd.finish()
		return 0, false, nil // the staged write says what it means
	}
	sc.aside = s.newAside(ctx)
	absorbed, err = s.splitTx(ctx, c, sc, recs, rd)
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
