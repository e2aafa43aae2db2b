package sql

import (
	"context"
	"fmt"
	"time"

	"github.com/mqb-dev/mqb/plan"
)

// Rows behind the cursor. Paging by `cursor_column >= next` reads every
// row only while rows reach the table with values above the ones already
// read (source_inflight.go covers those still being written): a row
// inserted later with an explicit lower value, or with a value a
// sequence cached (CACHE > 1) for another session, is behind the cursor
// and would never be read. That is the plan's increasing_id premise on the
// source. The source checks it rather than trusting it: it keeps how many
// rows are at or below the last value it read (counted, plus read since),
// and counts them again whenever it has caught up with the table (and at
// least every behindEvery while it has not); more than it has read is a
// row it passed over, and stops the route naming them. Fewer is a delete.
// The count travels with each record (Record.Next, so the checkpoint's
// Offset), and a restart counts again before the first read, so rows
// inserted behind the cursor while the route was down are found too. A
// delete and an insert behind the cursor between two counts cancel out
// and escape it.
//
// A count scans the cursor column's index up to the cursor, so the check
// runs at most once per twenty times its own last duration: it never takes
// more than a twentieth of the source's time. Delaying it misses nothing,
// since it compares totals.

// behindEvery is how often the check runs while the source has not caught
// up.
const behindEvery = 30 * time.Second

// ArmPremise takes the increasing_id premise: the source checks it whether
// armed or not; arming gives its error the premise's reason.
func (s *sqlCursorSource) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseIncreasingID {
		return fmt.Errorf("the sql source cannot check a per-record %s premise", p.Kind)
	}
	s.premise = p.Reason
	return nil
}

// behindBound is the cursor value the behind count is taken up to: the
// last value read this run, else the last one committed before it.
func (s *sqlCursorSource) behindBound() (int64, bool) {
	switch {
	case s.prevLast >= 0:
		return s.prevLast, true
	case s.nextVal > 0:
		return int64(s.nextVal) - 1, true
	}
	return 0, false // nothing read yet: nothing can be behind
}

// countBehind counts the rows at or below bound.
func (s *sqlCursorSource) countBehind(ctx context.Context, bound int64) (int64, error) {
	var n int64
	q := `SELECT count(*) FROM ` + s.from + ` AS mqb_src WHERE mqb_src.` + s.col + ` <= `
	if s.dialect == dialectPostgres {
		if s.pg == nil || s.pg.IsClosed() {
			if err := s.connectPG(ctx); err != nil {
				return 0, err
			}
		}
		err := s.pg.QueryRow(ctx, q+`$1`, bound).Scan(&n)
		return n, err
	}
	err := s.my.QueryRowContext(ctx, q+`?`, bound).Scan(&n)
	return n, err
}

// checkBehind counts the rows at or below the cursor when it is due (force:
// at start-up, or caught up) and not too costly, and returns an *errCursor
// when there are more than the source has read.
func (s *sqlCursorSource) checkBehind(ctx context.Context, force bool) error {
	bound, ok := s.behindBound()
	if !ok {
		return nil
	}
	since := time.Since(s.behindAt)
	if !s.behindAt.IsZero() && (since < 20*s.behindCost || (!force && since < behindEvery)) {
		return nil
	}
	start := time.Now()
	n, err := s.countBehind(ctx, bound)
	s.behindAt, s.behindCost = time.Now(), time.Since(start)
	if err != nil {
		return err
	}
	if s.behindKnown && n > s.behind {
		msg := fmt.Sprintf("cursor_column %s: %d row(s) were committed with a value at or below %d after the source had read past it, and would never be read: rows must reach the table with values above those already read (a serial or identity column, a sequence with CACHE 1, AUTO_INCREMENT; not explicit or cached values). To read them, start the route from the beginning (mqbc state reset) and let the sink absorb the rows already written",
			s.col, n-s.behind, bound)
		if s.premise != "" {
			msg += "; the plan's premise increasing_id is broken (" + s.premise + ")"
		}
		return &errCursor{msg}
	}
	s.behind, s.behindKnown = n, true // fewer: rows deleted
	return nil
}
