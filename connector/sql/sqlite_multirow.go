package sql

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Multi-row inserts: a SQLite sink whose insert_query is one VALUES row,
//
//	INSERT INTO orders (id, amount) VALUES (${meta["mqb.id"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING
//
// writes the rows of a batch in chunks, each chunk one statement that
// repeats the VALUES row,
//
//	INSERT INTO orders (id, amount) VALUES (?, ?), (?, ?), … ON CONFLICT (id) DO NOTHING
//
// prepared once per chunk size on the sink's connection. SQLite inserts
// the rows of a VALUES list one after the other, each through the
// conflict clause, so a chunk leaves the table as the rows inserted one by
// one would: the first of two rows with one key is inserted and the second
// does nothing (or updates it, for DO UPDATE). SQLite plans, starts and
// resets the statement once per chunk instead of once per row, which is
// most of what a row cost besides its b-tree work.
//
// Each chunk runs inside a savepoint. A chunk that fails on a row (a
// constraint, a value too big) is rolled back to the savepoint, whatever
// conflict algorithm the statement or the table's columns name (FAIL keeps
// the rows before the failing one), and its rows are written again one by
// one, so the bad row alone is refused (to the DLQ) and the others land.
//
// Only statements of exactly that shape are written so (an allow-list):
// INSERT [OR ABORT|FAIL|IGNORE|REPLACE] INTO t [(cols)] VALUES (…) or
// REPLACE INTO …, followed by nothing that reads a parameter, no
// RETURNING, no second statement, no comment. report_outcome needs each
// row's own count, so a sink that reports outcomes writes row by row.

// multiRowMax is the most rows one chunk statement carries. Larger chunks
// gained nothing measurable on the sink's benchmark, and every size is a
// statement prepared on the connection.
const multiRowMax = 64

// maxVariables is the most bound parameters a statement may hold:
// SQLITE_MAX_VARIABLE_NUMBER of SQLite before 3.32, the lowest a build may
// still have.
const maxVariables = 999

// sqliteMultiPrefixRE is what may come before VALUES.
var sqliteMultiPrefixRE = lazyre.New(`(?is)^\s*(INSERT(\s+OR\s+(ABORT|FAIL|IGNORE|REPLACE))?|REPLACE)\s+INTO\s+[^\s(]+\s*(\([^()]*\))?\s*$`)

// sqliteMulti is insert_query cut around its VALUES row: a statement of k
// rows is head + row, (", " + row) k-1 times, + tail.
type sqliteMulti struct {
	head, row, tail string
	params          int   // parameters per row
	sizes           []int // the chunk sizes, largest first, all > 1
	stmts           map[int]*sqlite3.SQLiteStmt
	// savepoint, release and rollback bracket each chunk.
	savepoint, release, rollback *sqlite3.SQLiteStmt
	nv                           []driver.NamedValue // bound values of a chunk
	// chunks counts the chunks written whole (for tests).
	chunks int64
}

// multiRowInsert cuts insert_query's parts for multi-row chunks, or says
// it cannot.
func multiRowInsert(parts []plan.Part) (*sqliteMulti, bool) {
	var q strings.Builder
	n := 0
	for _, p := range parts {
		if p.Expr == "" {
			if strings.ContainsRune(p.Lit, 0) {
				return nil, false
			}
			q.WriteString(p.Lit)
			continue
		}
		n++
		q.WriteString(stageMark(n))
	}
	if n == 0 || n > maxVariables/2 {
		return nil, false
	}
	sql := q.String()
	at, open, closing, ok := valuesRow(sql)
	if !ok || !sqliteMultiPrefixRE().MatchString(sql[:at]) {
		return nil, false
	}
	rest := sql[closing+1:]
	trimmed := strings.TrimSpace(rest)
	switch {
	case strings.HasPrefix(trimmed, ","), // several VALUES rows already
		stageMarkRE().MatchString(rest), // DO UPDATE SET … = ${…}
		returningRE().MatchString(rest): // rows the sink would not read
		return nil, false
	}
	m := &sqliteMulti{
		head:   sql[:open],
		row:    stageMarkRE().ReplaceAllString(sql[open:closing+1], "?"),
		tail:   rest,
		params: n,
		stmts:  map[int]*sqlite3.SQLiteStmt{},
	}
	for k := min(multiRowMax, maxVariables/n); k > 1; k /= 4 {
		m.sizes = append(m.sizes, k)
	}
	if len(m.sizes) == 0 {
		return nil, false
	}
	return m, true
}

// statement is the chunk statement of k rows.
func (m *sqliteMulti) statement(k int) string {
	var q strings.Builder
	q.Grow(len(m.head) + k*(len(m.row)+2) + len(m.tail))
	q.WriteString(m.head)
	for i := range k {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(m.row)
	}
	q.WriteString(m.tail)
	return q.String()
}

// prepare prepares the savepoint statements and every chunk statement on
// c. A chunk statement must take k times the row's parameters: anything
// else means the rewrite misread insert_query.
func (m *sqliteMulti) prepare(c *sqlite3.SQLiteConn) error {
	for _, st := range []struct {
		to  **sqlite3.SQLiteStmt
		sql string
	}{
		{&m.savepoint, "SAVEPOINT mqb_chunk"},
		{&m.release, "RELEASE mqb_chunk"},
		{&m.rollback, "ROLLBACK TO mqb_chunk"},
	} {
		ds, err := c.Prepare(st.sql)
		if err != nil {
			return err
		}
		*st.to = ds.(*sqlite3.SQLiteStmt)
	}
	for _, k := range m.sizes {
		ds, err := c.Prepare(m.statement(k))
		if err != nil {
			return err
		}
		st := ds.(*sqlite3.SQLiteStmt)
		if st.NumInput() != k*m.params {
			st.Close()
			return fmt.Errorf("a chunk of %d rows takes %d parameters, not %d", k, st.NumInput(), k*m.params)
		}
		m.stmts[k] = st
	}
	m.nv = make([]driver.NamedValue, m.sizes[0]*m.params)
	for i := range m.nv {
		m.nv[i].Ordinal = i + 1
	}
	return nil
}

// close closes every statement prepared.
func (m *sqliteMulti) close() {
	for _, st := range []*sqlite3.SQLiteStmt{m.savepoint, m.release, m.rollback} {
		if st != nil {
			st.Close()
		}
	}
	for _, st := range m.stmts {
		st.Close()
	}
}

// size is the largest chunk size not above left, or 1.
func (m *sqliteMulti) size(left int) int {
	for _, k := range m.sizes {
		if k <= left {
			return k
		}
	}
	return 1
}

// armMultiRow turns multi-row chunks on when insert_query has the shape
// for them and the sink does not report outcomes. A statement SQLite
// will not prepare in chunks leaves the sink writing row by row.
func (s *sqlSink) armMultiRow(c *sqlite3.SQLiteConn) {
	if s.outcome {
		return
	}
	m, ok := multiRowInsert(s.insertParts)
	if !ok {
		return
	}
	if err := m.prepare(c); err != nil {
		m.close()
		return
	}
	s.multi = m
}

// writeChunks inserts the rows bound in vals (live are their records'
// indices in recs, in order) in chunks, in the transaction open on the
// connection. It returns the rows that changed nothing (absorbed by the
// conflict clause) and a batch error, if any; a row refused is refused on
// its record.
func (s *sqlSink) writeChunks(ctx context.Context, recs []*runtime.Record, live []int, vals []any) (absorbed int64, batchErr error) {
	m := s.multi
	np := m.params
	// The savepoint statements do no I/O and cannot wait: run without the
	// batch's context, which would cost the driver a goroutine each.
	bg := context.Background()
	for start := 0; start < len(live); {
		k := m.size(len(live) - start)
		chunk := live[start : start+k]
		start += k
		if k == 1 {
			n, err := s.execRow(ctx, recs[chunk[0]], vals[chunk[0]*np:(chunk[0]+1)*np])
			if err != nil {
				return absorbed, err
			}
			absorbed += n
			continue
		}
		for j, i := range chunk {
			for p := range np {
				m.nv[j*np+p].Value = vals[i*np+p]
			}
		}
		if _, err := m.savepoint.ExecContext(bg, nil); err != nil {
			return absorbed, s.batchError("savepoint", err)
		}
		res, err := m.stmts[k].ExecContext(ctx, m.nv[:k*np])
		if err == nil {
			if _, err := m.release.ExecContext(bg, nil); err != nil {
				return absorbed, s.batchError("release savepoint", err)
			}
			changed, err := res.RowsAffected()
			if err != nil {
				return absorbed, s.batchError("rows affected", err)
			}
			absorbed += int64(k) - changed
			m.chunks++
			continue
		}
		if !rowLevel(err) {
			return absorbed, s.batchError("insert", err)
		}
		// A row of the chunk was refused: undo the chunk and write its
		// rows one by one, so only that row fails.
		if _, err := m.rollback.ExecContext(bg, nil); err != nil {
			return absorbed, s.batchError("rollback to savepoint", err)
		}
		if _, err := m.release.ExecContext(bg, nil); err != nil {
			return absorbed, s.batchError("release savepoint", err)
		}
		for _, i := range chunk {
			n, err := s.execRow(ctx, recs[i], vals[i*np:(i+1)*np])
			if err != nil {
				return absorbed, err
			}
			absorbed += n
		}
	}
	return absorbed, nil
}

// execRow inserts one row whose values are vals through the one-row
// statement. It returns 1 when the row changed nothing, and a batch
// error; a row refused is refused on r.
func (s *sqlSink) execRow(ctx context.Context, r *runtime.Record, vals []any) (int64, error) {
	for i, v := range vals {
		s.nv[i].Value = v
	}
	res, err := s.stmt.ExecContext(ctx, s.nv)
	if err != nil {
		if rowLevel(err) {
			r.Refuse("sql insert: " + err.Error())
			return 0, nil
		}
		return 0, s.batchError("insert", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, s.batchError("rows affected", err)
	}
	if n == 0 {
		return 1, nil
	}
	return 0, nil
}
