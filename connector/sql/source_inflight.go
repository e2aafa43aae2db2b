package sql

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rows in flight. A cursor value is given out (by a sequence, an identity
// or serial column, AUTO_INCREMENT) when a row is inserted, but the row is
// seen only when its transaction commits, and transactions commit in any
// order: a page can hold row 6 while the transaction that took 5 is still
// running. Paging on past 6 would skip 5 for good, in a clean run as in
// any other, so a page's rows are passed on only once no transaction that
// might still commit a lower value is running:
//
//  1. read the page (its last value is H);
//  2. list the transactions running now that may write the table
//     (inFlight; on MySQL and MariaDB the locking read of step 1 has
//     waited for them already);
//  3. when the list is empty, the page stands; otherwise wait until each
//     of them has ended and read the page again, keeping the rows up to H.
//
// A row below H that the first read did not see took its value before H's
// row did, whose transaction had committed by then; so its transaction was
// running at step 2, or had ended (committed, and seen by the second read,
// or rolled back). A transaction that begins after step 2 takes values
// above H. That holds while values are given out in increasing order as
// rows are inserted (a sequence with CACHE 1, the default, in a column
// DEFAULT; AUTO_INCREMENT), not when a transaction takes a value in one
// statement (SELECT nextval(…)) and writes the row with it later.

// inFlight lists the transactions running on the source's server that may
// still commit rows of its table, other than the source's own. On
// PostgreSQL, for a table source, those are the transactions holding the
// RowExclusiveLock every INSERT takes on the table (or a partition of it)
// until it ends, listed by virtual transaction id (vxid true); for a query
// source, every transaction that has written (the in-progress list of the
// snapshot). MySQL and MariaDB need no list: there the page query is a
// locking read (LOCK IN SHARE MODE), which InnoDB makes wait for the
// transaction that inserted a row it meets, seen or not yet, and then
// reads the row if it was committed.
func (s *sqlCursorSource) inFlight(ctx context.Context) (ids []string, vxid bool, err error) {
	if s.dialect == dialectPostgres {
		if s.table != "" {
			var list string
			err := s.pg.QueryRow(ctx, `SELECT coalesce(string_agg(DISTINCT l.virtualtransaction, ','), '') FROM pg_locks l
WHERE l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()
  AND l.relation IN (`+pgTableAndPartitions+`)`, s.table).Scan(&list)
			if err != nil {
				return nil, true, fmt.Errorf("read the transactions in flight: %w", err)
			}
			if list == "" {
				return nil, true, nil
			}
			return strings.Split(list, ","), true, nil
		}
		var snap string
		if err := s.pg.QueryRow(ctx, `SELECT txid_current_snapshot()::text`).Scan(&snap); err != nil {
			return nil, false, fmt.Errorf("read the transactions in flight: %w", err)
		}
		ids, err := snapshotInProgress(snap)
		return ids, false, err
	}
	// MySQL and MariaDB: the page query is a locking read, which waits
	// for the transaction that inserted a row it meets (Open).
	return nil, false, nil
}

// snapshotInProgress reads the in-progress list of a PostgreSQL snapshot
// written as xmin:xmax:xip,xip,…
func snapshotInProgress(snap string) ([]string, error) {
	parts := strings.Split(snap, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("read the transactions in flight: snapshot %q is not xmin:xmax:list", snap)
	}
	if parts[2] == "" {
		return nil, nil
	}
	ids := strings.Split(parts[2], ",")
	for _, id := range ids {
		if _, err := strconv.ParseUint(id, 10, 64); err != nil {
			return nil, fmt.Errorf("read the transactions in flight: snapshot %q lists %q", snap, id)
		}
	}
	return ids, nil
}

// running counts those of ids still running.
func (s *sqlCursorSource) running(ctx context.Context, ids []string, vxid bool) (int, error) {
	var n int
	if vxid {
		// Each transaction holds the lock on its own virtual id until it ends.
		err := s.pg.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'virtualxid' AND granted AND virtualxid = ANY(string_to_array($1, ','))`,
			strings.Join(ids, ",")).Scan(&n)
		return n, err
	}
	err := s.pg.QueryRow(ctx, `SELECT count(*) FROM unnest(string_to_array($1, ',')::bigint[]) AS x WHERE txid_status(x) = 'in progress'`,
		strings.Join(ids, ",")).Scan(&n)
	return n, err
}

// waitInFlight waits until none of ids is running. upTo is the page's last
// cursor value, for the log.
func (s *sqlCursorSource) waitInFlight(ctx context.Context, ids []string, vxid bool, upTo int64) error {
	start := time.Now()
	pause, logged := time.Millisecond, false
	for {
		n, err := s.running(ctx, ids, vxid)
		if err != nil {
			return fmt.Errorf("read whether the transactions in flight have ended: %w", err)
		}
		if n == 0 {
			return nil
		}
		if !logged && time.Since(start) > 5*time.Second {
			logged = true
			s.log.Info("sql source: waiting for transactions in flight before passing on rows up to a cursor value, since they may still commit rows below it",
				"transactions", n, "cursor_column", s.col, "value", upTo, "waited", time.Since(start).Round(time.Second).String())
		}
		if !sleepCtx(ctx, pause) {
			return ctx.Err()
		}
		pause = min(2*pause, s.poll, 100*time.Millisecond)
	}
}
