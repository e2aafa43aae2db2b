package sql

import (
	"context"
	"errors"

	"github.com/mqb-dev/mqb/runtime"
)

// copyBinaryPG loads recs with bulk_copy's COPY in binary format, binding
// each record as the stream reaches it: the server stores the first
// tuples while the sink binds and encodes the next, and no text is
// rendered only to be parsed again. A record that cannot be bound is
// refused and left out. errBinaryMisfit says a value has no binary form
// (pgbinary.go): nothing was written, and the batch goes in text. t is
// the open transaction the COPY goes in under commit on sync, else nil.
func (s *sqlServerSink) copyBinaryPG(ctx context.Context, c *pgConn, recs []*runtime.Record, t *openTx) error {
	var ev runtime.Evaluator
	vals := make([]any, len(s.params))
	data := &binaryCopyReader{n: len(recs), buf: c.copyBuf[:0], encode: func(dst []byte, i int) ([]byte, bool) {
		if reason := s.bindRow(&ev, recs[i], vals); reason != "" {
			recs[i].Refuse(reason)
			return dst, true
		}
		return appendBinaryTuple(dst, s.copyOIDs, vals)
	}}
	err := s.copyIn(ctx, c, data, s.copySQL+" (FORMAT binary)", outboxNext(recs), t)
	misfit := data.stop()
	if cap(data.buf) <= 1<<20 { // not one a huge row grew
		c.copyBuf = data.buf // nothing reads it once stopped
	}
	if misfit && !errors.As(err, new(*errTxLost)) {
		return errBinaryMisfit
	}
	if err == nil {
		s.copyBinDone.Add(1)
	}
	return err
}
