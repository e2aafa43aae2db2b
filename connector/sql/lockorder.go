package sql

import (
	"bytes"
	"context"
	"database/sql/driver"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// Lock order. Two sink workers of one route (concurrency above 1) whose
// batches hold some keys in opposite orders deadlock on a server: each
// inserts a key the other inserts later, then waits for the other's
// transaction to end (soundness seed 17286: two multi-row ON CONFLICT DO
// NOTHING inserts into one PostgreSQL table). The server breaks the
// deadlock after a second by rolling one of them back, and Write writes
// that batch again (sink_server.go); but locks taken in one order cannot
// deadlock at all, so at concurrency above 1 the sink writes a batch's
// rows in the order of the values bound into the table's key: the
// PostgreSQL conflict target (ON CONFLICT (cols)), MySQL's primary key.
//
// The sort is stable, so rows of one key keep their read order, and the
// conflict clause resolves repeats within the batch as before. Rows of
// different keys change places, which changes nothing a verdict counts
// on: above concurrency 1 the workers already apply a route's records out
// of read order (two records may sit in two batches that run at once), so
// the compiler never counts on that order there (DESIGN §3: a DO UPDATE
// at concurrency above 1 needs a version guard). At concurrency 1 the
// rows keep read order (a serial column numbers them in that order),
// and Write's retry is all that a deadlock with another process gets.
//
// Only the writes that stand or fall as a whole are sorted: PostgreSQL's
// staged statement (pgstage.go) and MySQL's multi-statement batch. When
// one of them meets a refused row, the batch is rolled back and written
// row by row in read order to isolate it, so which of two rows a
// constraint refuses (a second unique column, say) stays what it was.
// The order compares the values as the sink sends them, byte by byte: two
// spellings of one key (' 1' and '1' into an integer) may still lock in
// either order, which Write's retry absorbs.

// lockOrder is the parameters of insert_query bound into the table's key,
// in parameter order; nil writes in read order.
type lockOrder []int

// lockOrderOf is the lock order of insert_query (parts) given the
// table's key columns as the server names them (fold, how it compares
// names): nil when a key column takes no parameter, or the statement has
// a shape keyColumnParams cannot read.
func lockOrderOf(parts []plan.Part, keyCols []string, fold identFold) lockOrder {
	if len(keyCols) == 0 {
		return nil
	}
	params, err := keyColumnParams(parts, keyCols, fold)
	if err != nil {
		return nil
	}
	bound := map[string]bool{}
	var o lockOrder
	for i, col := range params {
		o = append(o, i)
		bound[fold(col)] = true
	}
	for _, c := range keyCols {
		if !bound[fold(c)] {
			return nil // a key column the statement fills without a parameter
		}
	}
	slices.Sort(o)
	return o
}

// pgConflictTarget reads the column list of insert_query's ON CONFLICT
// (cols): nil when there is none, or it names a constraint or holds an
// expression (an index on lower(email)).
func pgConflictTarget(parts []plan.Part) []string {
	sc := sqlScanner{src: literalText(parts)}
	for {
		if !sc.skipToKeyword("ON") {
			return nil
		}
		sc.skipSpace()
		if sc.keyword("CONFLICT") {
			break
		}
	}
	sc.skipSpace()
	items, ok := sc.group()
	if !ok {
		return nil
	}
	var cols []string
	for _, it := range items {
		col := strings.TrimSpace(sc.src[it[0]:it[1]])
		name := sqlScanner{src: col}
		name.skipName()
		if col == "" || name.pos != len(col) || strings.Contains(col, ".") {
			return nil
		}
		cols = append(cols, col)
	}
	return cols
}

// mysqlPrimaryKey reads the columns of target's primary key (nil when it
// has none, or they cannot be read).
func (s *sqlServerSink) mysqlPrimaryKey(ctx context.Context, target string) []string {
	keys, exists, err := s.uniqueKeysMySQL(ctx, target)
	if err != nil || !exists {
		return nil
	}
	for _, k := range keys {
		if k.name == "PRIMARY" {
			return k.cols
		}
	}
	return nil
}

// sortText returns live, the indices of rows to write, in lock order:
// sorted by the key values (text, nil for NULL, first), stably. live is
// not changed.
func (o lockOrder) sortText(rows [][][]byte, live []int) []int {
	if len(o) == 0 || len(live) < 2 {
		return live
	}
	sorted := slices.Clone(live)
	slices.SortStableFunc(sorted, func(a, b int) int {
		for _, j := range o {
			x, y := rows[a][j], rows[b][j]
			switch {
			case x == nil && y == nil:
				continue
			case x == nil:
				return -1
			case y == nil:
				return 1
			}
			if c := bytes.Compare(x, y); c != 0 {
				return c
			}
		}
		return 0
	})
	return sorted
}

// appendKey appends the key values of args (driver values) to dst in
// text form, one after the other (NULL as a byte of its own), to sort
// rows by in lock order.
func (o lockOrder) appendKey(dst []byte, args []driver.NamedValue) []byte {
	for _, j := range o {
		mark := len(dst)
		dst = append(dst, 1)
		var null bool
		if dst, null = appendPGValue(dst, args[j].Value); null {
			dst[mark] = 0
		}
		dst = append(dst, 0)
	}
	return dst
}
