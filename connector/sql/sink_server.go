package sql

import (
	"bytes"
	"context"
	dbsql "database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/plan"
)

// sqlServerSink is the `sql` sink on a database server: postgres:// (the
// pgx wire protocol, pgconn) or mysql:// (go-sql-driver/mysql, MariaDB
// too). insert_query runs as written, once per record, every ${…} a bound
// parameter ($n for PostgreSQL, ? for MySQL), each batch in one
// transaction; a conflict clause the user wrote (ON CONFLICT … DO NOTHING /
// DO UPDATE, ON DUPLICATE KEY UPDATE, INSERT IGNORE) is what absorbs a
// replayed record.
//
// A row the database refuses on its own (a constraint, a value of the
// wrong type) fails alone: its record is dead-lettered and the rest of the
// batch is committed without it. Losing the connection, a deadlock, a
// serialization failure or a lock timeout fails the batch as retryable: the
// transaction is rolled back and the route's retry step writes it again.
//
// report_outcome sets meta["sql.outcome"] from the rows the statement
// affected: 1 → inserted, 0 → existed. PostgreSQL's ON CONFLICT DO UPDATE
// reports 1 for an update as for an insert, so there every row reads
// "inserted" (use DO NOTHING to tell them apart). MySQL reports 1 for an
// insert, 2 for a row ON DUPLICATE KEY UPDATE changed and 0 for one it left
// as it was (or INSERT IGNORE skipped): 1 → inserted, 0 and 2 → existed.
type sqlServerSink struct {
	route   string
	dialect sqlDialect
	rawURL  string
	url     string // redacted, for errors
	query   string
	params  []*runtime.Program
	absent  *absentWarner // placeholders naming fields records lack
	outcome bool
	absorb  absorbCount

	// PostgreSQL
	pg       *pgPool
	copySQL  string // bulk_copy: COPY t (cols) FROM STDIN
	copyCols int
	// copyOIDs, for a bulk_copy whose every column type has a binary
	// form (binaryFit), are the column types: batches go by binary COPY
	// (pgcopy.go).
	copyOIDs    []uint32
	copyBinDone atomic.Int64 // batches loaded by binary COPY
	stage       *pgStaged    // batches go through unnest arrays (pgstage.go)
	stageOff    atomic.Bool  // the server refused the staged form: row by row
	split       *pgSplit     // a staged upsert written partly by COPY (pgsplit.go)
	scratch     scratchPool  // what writes bind their rows into (pgscratch.go)
	staged      atomic.Int64 // chunks written by the staged statement
	// stageOIDs is each staged parameter's array type, stageDelims its
	// array delimiter, learnt from the first connection (stageReady).
	stageMu     sync.Mutex
	stageOIDs   []uint32
	stageDelims []byte
	stageElems  []uint32 // each staged parameter's type: its array's elements

	// onCommit: bulk_copy writes go into transactions kept open until
	// the route's commit (pgcommit.go); txs are those transactions,
	// txIdle the ones no write holds, txErr the loss of one holding
	// acked rows, for good.
	onCommit bool
	txMu     sync.Mutex
	txs      []*openTx
	txIdle   []*openTx
	txErr    error

	// MySQL
	my *dbsql.DB

	// keyParams: see sqlSink.keyParams; fits, sqlSink.fits (MySQL key
	// columns, columnfit.go).
	keyParams map[int]string
	fits      map[int]columnFit

	// outboxRoute, when set, is the route whose cursor position every
	// batch's transaction also commits (outbox.go).
	outboxRoute string

	// order, at concurrency above 1, is the key a batch's rows are
	// written in the order of, so that two workers lock them in one
	// order (lockorder.go); nil: read order.
	order lockOrder

	// conflicts counts the batches the server rolled back to settle a
	// conflict with another transaction, each written again (Write).
	conflicts atomic.Int64
	log       *slog.Logger
}

func newSQLServerSink(ctx context.Context, b *runtime.BuildEnv, sc *sqlSinkConfig, raw string) (*sqlServerSink, error) {
	d := dialectOf(raw)
	s := &sqlServerSink{route: b.Route(), dialect: d, rawURL: raw, url: plan.RedactURLs(raw), outcome: sc.ReportOutcome, log: b.Logger()}
	var err error
	if s.query, s.params, err = compileInsert(b, sc.InsertQuery, d.placeholder); err != nil {
		return nil, err
	}
	if sc.BulkCopy {
		if d != dialectPostgres {
			return nil, b.Errorf("bulk_copy", "COPY is PostgreSQL's; a %s sink inserts row by row", d)
		}
		table, cols, ok := copyTarget(s.query, len(s.params))
		if !ok {
			return nil, b.Errorf("bulk_copy", "needs insert_query of the form INSERT INTO table (col, …) VALUES (${…}, …) with one ${…} per column and nothing else, to load by COPY")
		}
		s.copySQL = "COPY " + table + " (" + cols + ") FROM STDIN"
		s.copyCols = len(s.params)
	}
	if d == dialectPostgres && !sc.BulkCopy && !sc.ReportOutcome {
		if st, ok := stagedInsert(sc.InsertQuery); ok && st.params == len(s.params) {
			s.stage = &st
			s.split = splitTarget(sc.InsertQuery)
		}
	}
	const size = 16 // idle connections kept; a route rarely runs more sink workers
	switch d {
	case dialectPostgres:
		cfg, err := pgConfig(raw)
		if err != nil {
			return nil, b.Errorf("url", "%v", err)
		}
		s.pg = &pgPool{cfg: cfg, query: s.query, idle: make(chan *pgConn, size)}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if ddl := sc.CreateTable; ddl != "" {
			conn, err := pgconn.ConnectConfig(cctx, cfg)
			if err != nil {
				return nil, b.Errorf("url", "connect to %s: %s", s.url, plan.RedactURLs(err.Error()))
			}
			_, err = conn.Exec(cctx, ddl).ReadAll()
			if sqlkv.CreateRace(err) { // another instance created it at the same moment
				_, err = conn.Exec(cctx, ddl).ReadAll()
			}
			conn.Close(cctx)
			if err != nil {
				return nil, b.Errorf("create_table", "%v", err)
			}
		}
		// Connect and prepare now: a wrong url or a query the server
		// rejects fails the route before a record moves.
		conn, err := s.pg.get(cctx)
		if err != nil {
			if pe, ok := err.(*pgPrepareError); ok {
				return nil, b.Errorf("insert_query", "prepare %q: %v", s.query, pe.err)
			}
			return nil, b.Errorf("url", "connect to %s: %s", s.url, plan.RedactURLs(err.Error()))
		}
		if s.copySQL != "" && binaryFit(conn.stmt.ParamOIDs) {
			s.copyOIDs = conn.stmt.ParamOIDs
		}
		if s.split != nil && !splitReady(cctx, conn.conn, s.split) {
			s.split = nil
		}
		if s.split != nil {
			s.log.Debug("sql sink: a batch's rows of keys it has not written go by COPY", "copy", s.split.copySQL)
		}
		s.warnVolatilePG(cctx, conn.conn)
		s.pg.put(cctx, conn)
		if s.stage != nil && b.Concurrency() > 1 {
			s.order = lockOrderOf(sc.InsertQuery, pgConflictTarget(sc.InsertQuery), foldPostgres)
		}
		if s.split != nil && b.Concurrency() > 1 {
			s.split.aside = false // one write in flight (pgaside.go)
		}
	case dialectMySQL:
		cfg, err := mysqlConfig(raw)
		if err != nil {
			return nil, b.Errorf("url", "%v", err)
		}
		// Batches go as multi-statement queries (see writeMySQLMulti);
		// every value is still escaped by the driver.
		cfg.MultiStatements = true
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, b.Errorf("url", "%s: %s", s.url, plan.RedactURLs(err.Error()))
		}
		s.my = dbsql.OpenDB(conn)
		s.my.SetMaxOpenConns(size)
		s.my.SetMaxIdleConns(size)
		s.my.SetConnMaxIdleTime(5 * time.Minute)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := s.my.PingContext(cctx); err != nil {
			s.my.Close()
			return nil, b.Errorf("url", "connect to %s: %s", s.url, plan.RedactURLs(err.Error()))
		}
		if ddl := sc.CreateTable; ddl != "" {
			if _, err := s.my.ExecContext(cctx, ddl); err != nil {
				s.my.Close()
				return nil, b.Errorf("create_table", "%v", err)
			}
		}
		if table, _, ok := insertNames(sc.InsertQuery); ok && b.Concurrency() > 1 {
			s.order = lockOrderOf(sc.InsertQuery, s.mysqlPrimaryKey(cctx, table), foldCaseless)
		}
		s.warnVolatileMySQL(cctx)
	default:
		return nil, b.Errorf("url", "%s: not a postgres:// or mysql:// url", s.url)
	}
	if s.order != nil {
		s.log.Debug("sql sink: the rows of a batch go in key order, so that the route's workers lock them in one order",
			"params", fmt.Sprint([]int(s.order)), "concurrency", b.Concurrency())
	}
	return s, nil
}

// copyTargetRE matches the one insert shape COPY can load: a plain column
// list and a VALUES row of bare placeholders.
var copyTargetRE = lazyre.New(`(?is)^\s*INSERT\s+INTO\s+([^\s(]+)\s*\(([^)]*)\)\s*VALUES\s*\(([^)]*)\)\s*;?\s*$`)

func copyTarget(query string, n int) (table, cols string, ok bool) {
	m := copyTargetRE().FindStringSubmatch(query)
	if m == nil {
		return "", "", false
	}
	vals := strings.Split(m[3], ",")
	if len(vals) != n || len(strings.Split(m[2], ",")) != n {
		return "", "", false
	}
	for i, v := range vals {
		if strings.TrimSpace(v) != "$"+strconv.Itoa(i+1) {
			return "", "", false
		}
	}
	return m[1], strings.TrimSpace(m[2]), true
}

func (s *sqlServerSink) Close() error {
	s.closeTxs()
	if s.pg != nil {
		s.pg.close()
	}
	if s.my != nil {
		return s.my.Close()
	}
	return nil
}

// batchError wraps a batch-level failure with the route, and marks it
// retryable when a new attempt can succeed. Server messages never carry the
// password; pgconn's connect errors name the host and user only, and are
// redacted all the same.
func (s *sqlServerSink) batchError(op string, err error) error {
	e := fmt.Errorf("route %s: sql sink (%s): %s: %s", s.route, s.url, op, plan.RedactURLs(err.Error()))
	if s.dialect.txConflict(err) {
		e = &txConflictError{e}
	}
	if s.dialect.classify(err) == sqlRetryable {
		return runtime.Retryable(e)
	}
	return e
}

// bindRow evaluates every parameter of r into out; it returns why r
// cannot be written, or "".
func (s *sqlServerSink) bindRow(ev *runtime.Evaluator, r *runtime.Record, out []any) string {
	return bindParams(ev, s.params, s.keyParams, s.fits, s.absent, r, func(i int, v any) { out[i] = v })
}

func setOutcome(r *runtime.Record, inserted bool) {
	if inserted {
		r.SetMeta(metaSQLOutcome, "inserted")
	} else {
		r.SetMeta(metaSQLOutcome, "existed")
	}
}

// txConflictError is a batch error (batchError) of a transaction the
// server rolled back to settle a conflict with another (sqlDialect.txConflict).
type txConflictError struct{ err error }

func (e *txConflictError) Error() string { return e.err.Error() }
func (e *txConflictError) Unwrap() error { return e.err }

// A batch whose transaction the server rolled back to settle a conflict
// is written again by the sink itself, up to conflictAttempts writes in
// all, after a wait that starts at conflictBackoff, doubles up to
// conflictMaxBackoff and is drawn at random between half of it and all of
// it, so that two workers the server set against each other do not meet
// again at once. This does not depend on the route having a retry step:
// a deadlock between a route's own sink workers is no fault of the
// database, and stopping the route on it would stop a clean run.
const (
	conflictAttempts   = 10
	conflictBackoff    = 20 * time.Millisecond
	conflictMaxBackoff = time.Second
)

// Write writes the batch (writeBatch), again while the server rolls its
// transaction back to settle a conflict. Each new attempt starts from
// the refusals the batch came with: a record a rolled back attempt
// refused is tried again, as the route's retry step does (an outcome it
// set is set again by the attempt that writes the record).
func (s *sqlServerSink) Write(ctx context.Context, recs []*runtime.Record) error {
	if len(recs) == 0 {
		return nil
	}
	if s.onCommit {
		// Writes into transactions kept open until the route's commit:
		// a rolled back one held acked rows too (pgcommit.go).
		return s.writeBatch(ctx, recs)
	}
	var refused map[int]string // the refusals the batch came with
	for i, r := range recs {
		if why := r.Refused(); why != "" {
			if refused == nil {
				refused = map[int]string{}
			}
			refused[i] = why
		}
	}
	wait := conflictBackoff
	for attempt := 1; ; attempt++ {
		err := s.writeBatch(ctx, recs)
		var conflict *txConflictError
		if err == nil || !errors.As(err, &conflict) {
			return err
		}
		if attempt == conflictAttempts {
			return fmt.Errorf("%w (the batch was written %d times)", err, attempt)
		}
		s.conflicts.Add(1)
		if s.log != nil {
			s.log.Warn("sql sink: the server rolled the batch back to settle a conflict with another transaction, writing it again",
				"attempt", attempt, "err", err)
		}
		for i, r := range recs {
			r.Refuse(refused[i])
		}
		time.Sleep(wait/2 + rand.N(wait/2+1))
		wait = min(2*wait, conflictMaxBackoff)
	}
}

// writeBatch writes the batch once.
func (s *sqlServerSink) writeBatch(ctx context.Context, recs []*runtime.Record) error {
	if s.dialect == dialectMySQL {
		return s.writeMySQL(ctx, recs)
	}
	return s.writePG(ctx, recs)
}

// ---- MySQL / MariaDB

// errMySQLRowRefused: a multi-statement batch hit a refused row; the batch
// is written again row by row to find it.
var errMySQLRowRefused = errors.New("a row was refused")

// mysqlChunk is how many inserts go in one multi-statement query.
const mysqlChunk = 256

// writeMySQLMulti writes the batch in one transaction as multi-statement
// queries of mysqlChunk inserts each: one round trip per chunk instead of
// per row, in read order, or at concurrency above 1 in key order
// (lockorder.go). The rows affected of every statement give
// report_outcome. A refused row stops the server at that statement
// without saying which it was, so the transaction is rolled back and
// errMySQLRowRefused returned.
func (s *sqlServerSink) writeMySQLMulti(ctx context.Context, recs []*runtime.Record) error {
	var ev runtime.Evaluator
	type row struct {
		r    *runtime.Record
		args []driver.NamedValue
		key  []byte // in lock order (s.order)
	}
	rows := make([]row, 0, len(recs))
	args := make([]any, len(s.params))
	var keys []byte
	for _, r := range recs {
		if reason := s.bindRow(&ev, r, args); reason != "" {
			r.Refuse(reason)
			continue
		}
		nv := make([]driver.NamedValue, len(args))
		for i, v := range args {
			nv[i] = driver.NamedValue{Value: v}
		}
		var key []byte
		if s.order != nil {
			start := len(keys)
			keys = s.order.appendKey(keys, nv)
			key = keys[start:len(keys):len(keys)]
		}
		rows = append(rows, row{r, nv, key})
	}
	if len(rows) == 0 {
		return nil
	}
	if s.order != nil {
		slices.SortStableFunc(rows, func(a, b row) int { return bytes.Compare(a.key, b.key) })
	}
	conn, err := s.my.Conn(ctx)
	if err != nil {
		return s.batchError("connect", err)
	}
	defer conn.Close()
	var outErr error
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot exec", dc)
		}
		exec := func(q string, nv []driver.NamedValue) (driver.Result, error) { return ex.ExecContext(ctx, q, nv) }
		fail := func(op string, err error) error {
			exec("ROLLBACK", nil)
			if classifyMySQL(err) == sqlRowLevel {
				outErr = errMySQLRowRefused
			} else {
				outErr = s.batchError(op, err)
			}
			if classifyMySQL(err) == sqlRetryable {
				return driver.ErrBadConn // let database/sql drop the connection
			}
			return nil
		}
		if _, err := exec("BEGIN", nil); err != nil {
			return fail("begin", err)
		}
		var q strings.Builder
		var nv []driver.NamedValue
		for start := 0; start < len(rows); start += mysqlChunk {
			chunk := rows[start:min(start+mysqlChunk, len(rows))]
			q.Reset()
			nv = nv[:0]
			for i, rw := range chunk {
				if i > 0 {
					q.WriteString(";\n")
				}
				q.WriteString(s.query)
				for _, v := range rw.args {
					v.Ordinal = len(nv) + 1
					nv = append(nv, v)
				}
			}
			res, err := exec(q.String(), nv)
			if err != nil {
				return fail("insert", err)
			}
			if s.outcome {
				mr, ok := res.(mysql.Result)
				if !ok || len(mr.AllRowsAffected()) != len(chunk) {
					return fail("rows affected", fmt.Errorf("%d results for %d statements", len(mr.AllRowsAffected()), len(chunk)))
				}
				for i, n := range mr.AllRowsAffected() {
					setOutcome(chunk[i].r, n == 1)
				}
			}
		}
		if s.outboxRoute != "" {
			if _, err := exec(outboxUpsertMySQL, []driver.NamedValue{{Ordinal: 1, Value: s.outboxRoute}, {Ordinal: 2, Value: int64(outboxNext(recs))}}); err != nil {
				return fail("outbox position", err)
			}
		}
		if _, err := exec("COMMIT", nil); err != nil {
			return fail("commit", err)
		}
		return nil
	})
	if err != nil && outErr == nil {
		return s.batchError("connection", err)
	}
	return outErr
}

// writeMySQL runs the batch through writeMySQLMulti and, when a row is
// refused, again in one transaction row by row: InnoDB undoes just the
// failing statement of a refused row and the transaction goes on; a
// deadlock rolls back the whole transaction and fails the batch.
func (s *sqlServerSink) writeMySQL(ctx context.Context, recs []*runtime.Record) error {
	if err := s.writeMySQLMulti(ctx, recs); !errors.Is(err, errMySQLRowRefused) {
		return err
	}
	var ev runtime.Evaluator
	args := make([]any, len(s.params))
	tx, err := s.my.BeginTx(ctx, nil)
	if err != nil {
		return s.batchError("begin", err)
	}
	for _, r := range recs {
		if reason := s.bindRow(&ev, r, args); reason != "" {
			r.Refuse(reason)
			continue
		}
		res, err := tx.ExecContext(ctx, s.query, args...)
		if err != nil {
			if classifyMySQL(err) == sqlRowLevel {
				r.Refuse("sql insert: " + err.Error())
				continue
			}
			tx.Rollback()
			return s.batchError("insert", err)
		}
		if s.outcome {
			n, err := res.RowsAffected()
			if err != nil {
				tx.Rollback()
				return s.batchError("rows affected", err)
			}
			setOutcome(r, n == 1)
		}
	}
	if s.outboxRoute != "" {
		if _, err := tx.ExecContext(ctx, outboxUpsertMySQL, s.outboxRoute, outboxNext(recs)); err != nil {
			tx.Rollback()
			return s.batchError("outbox position", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return s.batchError("commit", err)
	}
	return nil
}

// ---- PostgreSQL

// pgConn is a pooled connection with insert_query prepared on it.
type pgConn struct {
	conn   *pgconn.PgConn
	stmt   *pgconn.StatementDescription
	staged bool // the staged statement is prepared in this session
	// copyBuf is the buffer the last binary COPY on this connection
	// rendered its tuples in, for the next one (a write uses a
	// connection alone; copyBinaryPG hands it back once its reader is
	// stopped).
	copyBuf []byte
}

// pgPool holds idle connections. A connection the server dropped is
// noticed when it is used (the batch fails as retryable) and closed when
// returned, so the retry dials a fresh one.
type pgPool struct {
	cfg   *pgconn.Config
	query string
	idle  chan *pgConn
	mu    sync.Mutex
	done  bool
}

type pgPrepareError struct{ err error }

func (e *pgPrepareError) Error() string { return e.err.Error() }
func (e *pgPrepareError) Unwrap() error { return e.err }

const pgStmtName = "mqb_insert"

func (p *pgPool) get(ctx context.Context) (*pgConn, error) {
	for {
		select {
		case c := <-p.idle:
			if c.conn.IsClosed() {
				continue
			}
			return c, nil
		default:
		}
		conn, err := pgconn.ConnectConfig(ctx, p.cfg)
		if err != nil {
			return nil, err
		}
		stmt, err := conn.Prepare(ctx, pgStmtName, p.query, nil)
		if err != nil {
			conn.Close(ctx)
			if classifyPG(err) == sqlRetryable {
				return nil, err
			}
			return nil, &pgPrepareError{err}
		}
		return &pgConn{conn: conn, stmt: stmt}, nil
	}
}

// put returns c to the pool, rolling back a transaction an error left open.
func (p *pgPool) put(ctx context.Context, c *pgConn) {
	if !c.conn.IsClosed() && c.conn.TxStatus() != 'I' {
		if _, err := c.conn.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
			c.conn.Close(ctx)
		}
	}
	if c.conn.IsClosed() || c.conn.IsBusy() {
		c.conn.Close(ctx)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		c.conn.Close(ctx)
		return
	}
	select {
	case p.idle <- c:
	default:
		c.conn.Close(ctx)
	}
}

func (p *pgPool) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case c := <-p.idle:
			c.conn.Close(ctx)
		default:
			return
		}
	}
}

// appendPGValue appends v in PostgreSQL's text format to dst; null is
// true for nil (NULL). The server parses the text as the type of the
// column or expression the placeholder stands for, so a value of the
// wrong type is the server's row-level error (22P02), not a client-side
// failure.
func appendPGValue(dst []byte, v any) (out []byte, null bool) {
	switch x := v.(type) {
	case nil:
		return dst, true
	case string:
		return append(dst, x...), false
	case []byte:
		return append(dst, x...), false
	case int64:
		return strconv.AppendInt(dst, x, 10), false
	case uint64:
		return strconv.AppendUint(dst, x, 10), false
	case json.Number:
		return append(dst, x...), false
	case float64:
		return strconv.AppendFloat(dst, x, 'g', -1, 64), false
	case bool:
		return strconv.AppendBool(dst, x), false
	}
	b, _ := json.Marshal(v)
	return append(dst, b...), false
}

// pgRows binds recs into rows of text values (nil for NULL), refusing
// the records that cannot be bound, and returns the indices of the
// others. The values of a batch share one buffer and the rows one slice
// of slices, all of them sc's: no allocation once sc has held a batch
// as large.
func (s *sqlServerSink) pgRows(sc *pgScratch, recs []*runtime.Record) (rows [][][]byte, live []int) {
	b := s.binder(sc, len(recs))
	for i, r := range recs {
		b.bind(i, r)
	}
	return sc.rows, sc.live
}

// rowBinder binds a write's records into sc one at a time, in read order
// (pgRows, or a split write's COPY as it reads: pgstream.go).
type rowBinder struct {
	s    *sqlServerSink
	sc   *pgScratch
	ev   runtime.Evaluator
	args []any
}

// binder readies sc for a write of n records.
func (s *sqlServerSink) binder(sc *pgScratch, n int) *rowBinder {
	sc.rows = grow(sc.rows, n)
	clear(sc.rows)
	sc.cells = grow(sc.cells, n*len(s.params))
	sc.live = sc.live[:0]
	sc.arena = sc.arena[:0]
	if sc.arena == nil {
		sc.arena = make([]byte, 0, 64*n) // never nil: a nil slice of it would be NULL, not ''
	}
	return &rowBinder{s: s, sc: sc, args: make([]any, len(s.params))}
}

// bind binds record i, r, into sc.rows[i] and adds i to sc.live; it
// refuses r and returns false when r cannot be bound. A row's values are
// slices of sc.arena as it is then: when the arena grows into a new
// array, the rows bound before keep the old one, which nothing writes
// again.
func (b *rowBinder) bind(i int, r *runtime.Record) bool {
	if reason := b.s.bindRow(&b.ev, r, b.args); reason != "" {
		r.Refuse(reason)
		return false
	}
	sc, n := b.sc, len(b.args)
	row := sc.cells[i*n : (i+1)*n : (i+1)*n]
	for j, v := range b.args {
		start := len(sc.arena)
		var null bool
		sc.arena, null = appendPGValue(sc.arena, v)
		row[j] = nil
		if !null {
			row[j] = sc.arena[start:len(sc.arena):len(sc.arena)]
		}
	}
	sc.rows[i] = row
	sc.live = append(sc.live, i)
	return true
}

// writePG writes the batch in one transaction sent as one pipeline (BEGIN,
// every insert, COMMIT: a single round trip). A refused row aborts a
// PostgreSQL transaction, so when one is refused the batch is written
// again with a savepoint around each row, rolling back to it past each
// refused row (writePGSavepoints). bulk_copy loads the batch with one COPY,
// binary when every value has a binary form (pgcopy.go), text otherwise,
// and falls back to the inserts when COPY refuses a row.
func (s *sqlServerSink) writePG(ctx context.Context, recs []*runtime.Record) error {
	if s.onCommit {
		return s.writeCopyOnCommit(ctx, recs)
	}
	c, err := s.pg.get(ctx)
	if err != nil {
		if pe, ok := err.(*pgPrepareError); ok {
			return fmt.Errorf("route %s: sql sink (%s): prepare %q: %w", s.route, s.url, s.query, pe.err)
		}
		return s.batchError("connect", err)
	}
	defer s.pg.put(ctx, c)

	textCopy := s.copySQL != ""
	if s.copyOIDs != nil {
		err := s.copyBinaryPG(ctx, c, recs, nil)
		switch {
		case err == nil:
			if s.outcome {
				for _, r := range recs {
					if r.Refused() == "" {
						setOutcome(r, true)
					}
				}
			}
			return nil
		case errors.Is(err, errBinaryMisfit): // the text COPY below
		case classifyPG(err) == sqlRowLevel:
			textCopy = false // it would refuse the row too: the inserts find it
		default:
			return s.batchError("copy", err)
		}
	}
	sc := s.scratch.get()
	defer s.scratch.put(sc)
	split := s.stage != nil && !s.stageOff.Load() && s.split != nil && s.split.due()
	var rows [][][]byte
	var live []int
	if split && len(s.order) == 0 && s.split.exact {
		// Bound as the write's COPY reads them (pgstream.go).
		absorbed, done, err := s.splitStreamPG(ctx, c, sc, recs)
		if err != nil {
			return s.batchError("insert", err)
		}
		if done {
			s.absorb.add(absorbed)
			return nil
		}
		split = false
		rows, live = sc.rows, sc.live
	} else {
		rows, live = s.pgRows(sc, recs)
	}
	if len(live) == 0 {
		return nil
	}
	if textCopy {
		err := s.copyIn(ctx, c, sc.copyOf(rows, live), s.copySQL, outboxNext(recs), nil)
		if err == nil {
			if s.outcome {
				for _, i := range live {
					setOutcome(recs[i], true)
				}
			}
			return nil
		}
		if classifyPG(err) != sqlRowLevel {
			return s.batchError("copy", err)
		}
		// A refused row fails the whole COPY: find it with the inserts.
	}
	if s.stage != nil && !s.stageOff.Load() {
		if split {
			absorbed, done, err := s.splitPG(ctx, c, sc, recs, rows, live)
			if err != nil {
				return s.batchError("insert", err)
			}
			if done {
				s.absorb.add(absorbed)
				return nil
			}
		}
		absorbed, rowWise, err := s.stagePG(ctx, c, recs, rows, live)
		if c.conn.TxStatus() != 'I' && !c.conn.IsClosed() {
			if _, rerr := c.conn.Exec(ctx, "ROLLBACK").ReadAll(); rerr != nil && err == nil {
				err = rerr
			}
		}
		if err != nil {
			return s.batchError("insert", err)
		}
		if !rowWise {
			s.absorb.add(absorbed)
			s.split.remember(rows, live)
			return nil
		}
		// A refused row, or staging turned off: the inserts below.
	}
	absorbed, err := s.writePGRows(ctx, c, recs, rows, live)
	if err != nil {
		return err
	}
	s.absorb.add(absorbed)
	return nil
}

// writePGRows writes the live rows with insert_query, one statement each,
// in one transaction sent as one pipeline, and returns how many of them
// changed nothing.
func (s *sqlServerSink) writePGRows(ctx context.Context, c *pgConn, recs []*runtime.Record, rows [][][]byte, live []int) (int64, error) {
	var b pgconn.Batch
	b.ExecParams("BEGIN", nil, nil, nil, nil)
	for _, i := range live {
		b.ExecStatement(c.stmt, rows[i], nil, nil)
	}
	s.queueOutbox(&b, recs)
	b.ExecParams("COMMIT", nil, nil, nil, nil)
	res, err := c.conn.ExecBatch(ctx, &b).ReadAll()
	if err == nil {
		var absorbed int64
		for k, i := range live {
			n := res[1+k].CommandTag.RowsAffected()
			if n == 0 {
				absorbed++
			}
			if s.outcome {
				setOutcome(recs[i], n > 0)
			}
		}
		return absorbed, nil
	}
	if classifyPG(err) != sqlRowLevel || len(res) == 0 || len(res) > len(live) {
		return 0, s.batchError("insert", err)
	}
	// res holds BEGIN and the inserts before the refused one.
	bad := live[len(res)-1]
	recs[bad].Refuse("sql insert: " + err.Error())
	if _, err := c.conn.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		return 0, s.batchError("rollback", err)
	}
	return s.writePGSavepoints(ctx, c, recs, rows, live)
}

// writePGSavepoints writes the live records that have no sinkErr yet, each
// inside a savepoint, still pipelined: when row k is refused, the server
// skips the rest of the pipeline; the sink rolls back to k's savepoint,
// marks k and sends the rows after it. Every refused row costs one round
// trip more, not a rewrite of the batch.
func (s *sqlServerSink) writePGSavepoints(ctx context.Context, c *pgConn, recs []*runtime.Record, rows [][][]byte, live []int) (int64, error) {
	todo := live[:0:0]
	for _, i := range live {
		if recs[i].Refused() == "" {
			todo = append(todo, i)
		}
	}
	first := true
	var absorbed int64 // rows of the transaction whose insert changed nothing
	written := func(res []*pgconn.Result, off int, rows []int) {
		for k, i := range rows {
			n := res[off+3*k+1].CommandTag.RowsAffected()
			if n == 0 {
				absorbed++
			}
			if s.outcome {
				setOutcome(recs[i], n > 0)
			}
		}
	}
	for {
		var b pgconn.Batch
		if first {
			b.ExecParams("BEGIN", nil, nil, nil, nil)
		}
		for _, i := range todo {
			b.ExecParams("SAVEPOINT mqb_row", nil, nil, nil, nil)
			b.ExecStatement(c.stmt, rows[i], nil, nil)
			b.ExecParams("RELEASE SAVEPOINT mqb_row", nil, nil, nil, nil)
		}
		s.queueOutbox(&b, recs)
		b.ExecParams("COMMIT", nil, nil, nil, nil)
		res, err := c.conn.ExecBatch(ctx, &b).ReadAll()
		off := 0
		if first {
			off = 1
		}
		first = false
		if err == nil {
			written(res, off, todo)
			return absorbed, nil
		}
		n := len(res) - off // commands of the rows that went through, and the refused row's SAVEPOINT
		k := n / 3
		if classifyPG(err) != sqlRowLevel || n < 0 || n%3 != 1 || k >= len(todo) {
			return 0, s.batchError("insert", err)
		}
		written(res, off, todo[:k])
		recs[todo[k]].Refuse("sql insert: " + err.Error())
		if _, err := c.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT mqb_row").ReadAll(); err != nil {
			return 0, s.batchError("rollback to savepoint", err)
		}
		todo = todo[k+1:]
	}
}

// copyIn loads data with copySQL (COPY … FROM STDIN): one statement,
// atomic on its own (in a transaction with the outbox position when there
// is one). data renders the rows as COPY reads them (copyReader,
// binaryCopyReader), so the server parses the first ones while the sink
// renders the next. Under commit on sync it goes in t's open
// transaction, in one query after the statements that open it if need
// be and set the write's savepoint (writeStatements), and a failed COPY
// rolls back to that savepoint (abortWrite).
func (s *sqlServerSink) copyIn(ctx context.Context, c *pgConn, data io.Reader, copySQL string, next uint64, t *openTx) error {
	if t != nil {
		if _, err := c.conn.CopyFrom(ctx, data, writeStatements(t)+copySQL); err != nil {
			return s.abortWrite(ctx, t, err)
		}
		t.wrote()
		return nil
	}
	if s.outboxRoute == "" {
		_, err := c.conn.CopyFrom(ctx, data, copySQL)
		return err
	}
	if _, err := c.conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return err
	}
	tag, err := c.conn.CopyFrom(ctx, data, copySQL)
	if err != nil {
		c.conn.Exec(ctx, "ROLLBACK").ReadAll()
		return err
	}
	if tag.RowsAffected() == 0 {
		// Every record was refused as it was bound: the position stays
		// where it was, as when a batch has nothing to write.
		_, err := c.conn.Exec(ctx, "ROLLBACK").ReadAll()
		return err
	}
	var b pgconn.Batch
	b.ExecParams(outboxUpsertPG, [][]byte{[]byte(s.outboxRoute), strconv.AppendUint(nil, next, 10)}, nil, nil, nil)
	b.ExecParams("COMMIT", nil, nil, nil, nil)
	_, err = c.conn.ExecBatch(ctx, &b).ReadAll()
	return err
}

// copyReader renders the live rows in COPY's text format as it is read:
// each Read renders about as many rows as fit.
type copyReader struct {
	rows [][][]byte
	live []int
	text copyText
}

func (r *copyReader) Read(p []byte) (int, error) { return r.text.read(p, r.next) }

// next renders the next live row onto buf; false when none is left.
func (r *copyReader) next(buf []byte) ([]byte, bool) {
	if len(r.live) == 0 {
		return buf, false
	}
	buf = appendCopyRow(buf, r.rows[r.live[0]])
	r.live = r.live[1:]
	return buf, true
}

// copyText is the text a COPY reader rendered that COPY has not read.
type copyText struct {
	buf []byte
	off int
}

// read keeps what the last read left over, renders rows with next until
// the text fills p or next has none left, and copies it into p: each
// read a full CopyData message.
func (t *copyText) read(p []byte, next func(buf []byte) ([]byte, bool)) (int, error) {
	t.buf, t.off = append(t.buf[:0], t.buf[t.off:]...), 0
	for more := true; more && len(t.buf) < len(p); {
		t.buf, more = next(t.buf)
	}
	if len(t.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, t.buf)
	t.off = n
	return n, nil
}

// appendCopyRow appends row in COPY's text format: tab-separated, \N for
// NULL, backslash, newline, carriage return and tab escaped.
func appendCopyRow(dst []byte, row [][]byte) []byte {
	for j, v := range row {
		if j > 0 {
			dst = append(dst, '\t')
		}
		if v == nil {
			dst = append(dst, `\N`...)
			continue
		}
		for {
			i := bytes.IndexAny(v, "\\\n\r\t")
			if i < 0 {
				break
			}
			dst = append(dst, v[:i]...)
			switch v[i] {
			case '\\':
				dst = append(dst, `\\`...)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			}
			v = v[i+1:]
		}
		dst = append(dst, v...)
	}
	return append(dst, '\n')
}
