package sql

import (
	"context"
	dbsql "database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mqb-dev/mqb/runtime"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/mqb-dev/mqb/plan"
)

// The SQLite driver is github.com/mattn/go-sqlite3 (cgo): on the sink's
// pattern (one transaction and one prepared statement per batch, ON CONFLICT
// DO NOTHING, WAL) it inserted ~636k rows/s against ~417k for the pure-Go
// modernc.org/sqlite on the 2-core build machine (bench/sqlitedrivers).
const sqliteDriver = "sqlite3"

// sqlSink runs insert_query once per record, every ${…} bound as a
// parameter, each batch in one transaction.
type sqlSink struct {
	route   string
	node    string // plan node ID, for premises
	db      *dbsql.DB
	query   string             // insert_query with every ${…} replaced by ?
	params  []*runtime.Program // one per ?
	outcome bool               // report_outcome: meta["sql.outcome"]
	absorb  absorbCount

	mu   sync.Mutex  // SQLite has one writer: batches take turns
	conn *dbsql.Conn // the sink's one connection
	stmt *sqlite3.SQLiteStmt
	nv   []driver.NamedValue // bound values of the row being written
	eval runtime.Evaluator
	// absent warns of placeholders naming fields records lack.
	absent *absentWarner

	// server, when set, is the sink on a postgres:// or mysql:// url,
	// which does all the work (sink_sqldb.go).
	server *sqlServerSink

	// insertParts is insert_query as written; keyParams, armed by a
	// PremiseKeyPresent, maps the index of each parameter bound into a
	// conflict column to that column (premise_sql.go).
	insertParts []plan.Part
	keyParams   map[int]string
	// fits maps the index of each parameter bound into a column that
	// would change some values on the way in (numeric affinity,
	// sqlite_numeric.go) to that column.
	fits map[int]columnFit

	// multi, when set, writes a batch in multi-row chunks
	// (sqlite_multirow.go); vals and live hold the batch's bound rows.
	multi *sqliteMulti
	vals  []any
	live  []int
}

const metaSQLOutcome = "sql.outcome"

// sqlSinkConfig is a sql sink's attributes (stdlib declares them; table is
// the source's: a sink needs insert_query).
type sqlSinkConfig struct {
	// URL may call env(): renderStatic renders it from the node, naming
	// the attribute in its errors.
	URL           []plan.Part `attr:"url"`
	InsertQuery   []plan.Part `attr:"insert_query"`
	BulkCopy      bool        `attr:"bulk_copy"` // postgres:// only
	ReportOutcome bool        `attr:"report_outcome"`
	CreateTable   string      `attr:"create_table"`
}

func newSQLSink(ctx context.Context, b *runtime.BuildEnv, cfg *sqlSinkConfig) (*sqlSink, error) {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	if dialectOf(url) != 0 {
		srv, err := newSQLServerSink(ctx, b, cfg, url)
		if err != nil {
			return nil, err
		}
		return &sqlSink{route: b.Route(), node: b.NodeID(), server: srv, insertParts: cfg.InsertQuery}, nil
	}
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		scheme, _, _ := strings.Cut(url, "://")
		return nil, b.Errorf("url", "scheme %q is not supported by this runtime (sqlite://, postgres://, mysql://)", scheme)
	}
	path, _, _ = strings.Cut(path, "?")
	if path == "" {
		return nil, b.Errorf("url", "empty database path")
	}
	if !filepath.IsAbs(path) && b.BaseDir() != "" {
		path = filepath.Join(b.BaseDir(), path)
	}
	s := &sqlSink{route: b.Route(), node: b.NodeID(), outcome: cfg.ReportOutcome, insertParts: cfg.InsertQuery}
	if s.query, s.params, err = compileInsert(b, cfg.InsertQuery, func(int) string { return "?" }); err != nil {
		return nil, err
	}

	if err := createPrivate(path); err != nil {
		return nil, b.Errorf("url", "%v", err)
	}
	// synchronous=FULL: in WAL mode every commit syncs the WAL, so a
	// transaction is durable across a power loss, not only a process
	// crash, before Write returns and the engine acks its records and
	// commits past them (NORMAL would sync only at a WAL checkpoint: the
	// last transactions could vanish while the checkpoint store says they
	// were delivered). One sync per Write: a group of batches.
	dsn := "file:" + path + "?_journal_mode=WAL&_synchronous=FULL&_busy_timeout=5000"
	db, err := dbsql.Open(sqliteDriver, dsn)
	if err != nil {
		return nil, b.Errorf("url", "open %s: %v", path, err)
	}
	// One connection: SQLite has a single writer, and the pragmas and the
	// prepared statement live on the connection.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	s.db = db
	if ddl := cfg.CreateTable; ddl != "" {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			db.Close()
			return nil, b.Errorf("create_table", "%v", err)
		}
	}
	// The sink holds its one connection and works on it through the
	// driver: database/sql's per-Exec argument conversion and locking cost
	// about a fifth of the sink's time per row, and the sink is the serial
	// stage of a route into SQLite.
	if s.conn, err = db.Conn(ctx); err != nil {
		db.Close()
		return nil, b.Errorf("url", "open %s: %v", path, err)
	}
	err = s.conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		st, err := c.Prepare(s.query)
		if err != nil {
			return err
		}
		s.stmt = st.(*sqlite3.SQLiteStmt)
		s.armMultiRow(c)
		return nil
	})
	if err != nil {
		s.conn.Close()
		db.Close()
		return nil, b.Errorf("insert_query", "prepare %q: %v", s.query, err)
	}
	if err := s.armNumericColumns(ctx); err != nil {
		s.conn.Close()
		db.Close()
		return nil, b.Errorf("insert_query", "read the columns of its table: %v", err)
	}
	s.nv = make([]driver.NamedValue, len(s.params))
	for i := range s.nv {
		s.nv[i].Ordinal = i + 1
	}
	return s, nil
}

// absorbCount counts the records whose insert changed nothing because
// the conflict clause absorbed them, when the route's plan elided a dedup
// in favour of that clause (plan.Elision): the route then counts them as
// deduplicated. Counts are added once their transaction committed. Only
// ON CONFLICT (k) DO NOTHING stands in for a dedup, so SQLite and
// PostgreSQL count; MySQL has no such clause.
type absorbCount struct {
	on bool
	n  atomic.Int64
}

func (a *absorbCount) add(n int64) {
	if a.on && n > 0 {
		a.n.Add(n)
	}
}

// TakeAbsorbed returns the records absorbed since it was last called.
func (s *sqlSink) TakeAbsorbed() int64 {
	if s.server != nil {
		return s.server.absorb.n.Swap(0)
	}
	return s.absorb.n.Swap(0)
}

// countAbsorbed turns the count on.
func (s *sqlSink) countAbsorbed() {
	if s.server != nil {
		s.server.absorb.on = true
		return
	}
	s.absorb.on = true
}

// ReadsMetaByPrograms says the sink reads a record's metadata only
// through its parameters' programs (runtime.MetaByPrograms).
func (s *sqlSink) ReadsMetaByPrograms() bool { return true }

func (s *sqlSink) programs() []*runtime.Program {
	if s.server != nil {
		return s.server.params
	}
	return s.params
}

// Write inserts recs in one transaction. A row that violates a constraint
// (or cannot be bound) fails alone: SQLite undoes just that statement and
// the transaction goes on with the others. A busy database or an I/O error
// fails the batch as retryable; the transaction is rolled back.
func (s *sqlSink) Write(ctx context.Context, recs []*runtime.Record) error {
	if s.server != nil {
		return s.server.Write(ctx, recs)
	}
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var batchErr error
	var absorbed int64
	err := s.conn.Raw(func(dc any) error {
		c := dc.(*sqlite3.SQLiteConn)
		// Hold no record's values past its batch (ReleasesRecords).
		defer func() {
			for i := range s.nv {
				s.nv[i].Value = nil
			}
		}()
		tx, err := c.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			batchErr = s.batchError("begin", err)
			return nil
		}
		if s.multi != nil {
			absorbed, batchErr = s.writeChunks(ctx, recs, s.bindAll(recs), s.vals)
			// Hold no record's values past its batch.
			clear(s.vals)
			for i := range s.multi.nv {
				s.multi.nv[i].Value = nil
			}
			if batchErr != nil {
				tx.Rollback()
				return nil
			}
			if err := tx.Commit(); err != nil {
				batchErr = s.batchError("commit", err)
				return nil
			}
			s.absorb.add(absorbed)
			return nil
		}
		for _, r := range recs {
			if reason := s.bind(r); reason != "" {
				r.Refuse(reason)
				continue
			}
			res, err := s.stmt.ExecContext(ctx, s.nv)
			if err != nil {
				if rowLevel(err) {
					r.Refuse("sql insert: " + err.Error())
					continue
				}
				tx.Rollback()
				batchErr = s.batchError("insert", err)
				return nil
			}
			if s.outcome || s.absorb.on {
				n, err := res.RowsAffected()
				if err != nil {
					tx.Rollback()
					batchErr = s.batchError("rows affected", err)
					return nil
				}
				if n == 0 {
					absorbed++
				}
				if !s.outcome {
					continue
				}
				if n > 0 {
					r.SetMeta(metaSQLOutcome, "inserted")
				} else {
					r.SetMeta(metaSQLOutcome, "existed")
				}
			}
		}
		if err := tx.Commit(); err != nil {
			batchErr = s.batchError("commit", err)
			return nil
		}
		s.absorb.add(absorbed)
		return nil
	})
	if err != nil {
		return s.batchError("connection", err)
	}
	return batchErr
}

// bindAll binds every record of recs into s.vals, len(s.params) values
// per record at its index, refusing the records that cannot be written,
// and returns the indices of the others, in order.
func (s *sqlSink) bindAll(recs []*runtime.Record) []int {
	np := len(s.params)
	if cap(s.vals) < len(recs)*np {
		s.vals = make([]any, len(recs)*np)
	}
	s.vals = s.vals[:len(recs)*np]
	s.live = s.live[:0]
	for i, r := range recs {
		row := s.vals[i*np : (i+1)*np]
		if reason := bindParams(&s.eval, s.params, s.keyParams, s.fits, s.absent, r, func(j int, v any) { row[j] = v }); reason != "" {
			r.Refuse(reason)
			continue
		}
		s.live = append(s.live, i)
	}
	return s.live
}

// bind evaluates every parameter of r into s.nv; it returns why r cannot
// be written, or "".
func (s *sqlSink) bind(r *runtime.Record) string {
	return bindParams(&s.eval, s.params, s.keyParams, s.fits, s.absent, r, func(i int, v any) { s.nv[i].Value = v })
}

// bindParams evaluates each of params for r and hands set its bound
// value; it returns why r cannot be written, or "". A parameter in keys
// (bound into a conflict column the proof rests on) that is NULL fails the
// record: NULLs never conflict, so a replay of it would be inserted again.
//
// A parameter in fits whose value its column would not store as it is
// (rounded, clamped, cut short) fails the record too: two ids could
// become one row.
//
// A field path that binds NULL because the record lacks the field is
// warned about once (absent, which may be nil).
func bindParams(ev *runtime.Evaluator, params []*runtime.Program, keys map[int]string, fits map[int]columnFit, absent *absentWarner, r *runtime.Record, set func(i int, v any)) string {
	for i, p := range params {
		v, present, err := ev.Run(p, r)
		if err != nil {
			return fmt.Sprintf("bind ${%s}: %v", p.Expr(), err)
		}
		if key, isMeta := p.MetaKey(); isMeta && !present {
			if key == runtime.MetaID {
				return fmt.Sprintf("bind ${%s}: not set (the record has no identity: its id expression was missing or empty)", p.Expr())
			}
			return fmt.Sprintf("bind ${%s}: not set", p.Expr())
		}
		if len(fits) > 0 { // most sinks have none: no lookup a value
			if col, ok := fits[i]; ok {
				if why := col.misfit(v); why != "" {
					return fmt.Sprintf("bind ${%s}: %v does not fit column %s: %s", p.Expr(), v, col.column(), why)
				}
			}
		}
		bv, err := bindValue(v)
		if err != nil {
			return fmt.Sprintf("bind ${%s}: %v", p.Expr(), err)
		}
		if bv == nil && len(keys) > 0 {
			if col, isKey := keys[i]; isKey {
				return fmt.Sprintf("bind ${%s}: key column %s would be NULL; NULLs never conflict, so a replay of this record would be inserted again", p.Expr(), col)
			}
		}
		if bv == nil {
			absent.check(p, r)
		}
		set(i, bv)
	}
	return ""
}

// bindValue converts an expression value to a driver value keeping its
// JSON type: numbers stay numbers, objects and arrays become JSON text.
func bindValue(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, int64, float64, bool, []byte:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case uint64:
		if x > 1<<63-1 {
			// Past int64, no driver binds an integer: the digits go as
			// text, which a NUMERIC, DECIMAL, BIGINT UNSIGNED or TEXT
			// column takes exactly (never rounded through a float).
			return strconv.FormatUint(x, 10), nil
		}
		return int64(x), nil
	case json.Number:
		return string(x), nil // every digit, as text (see uint64)
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		return string(b), nil
	}
	return nil, fmt.Errorf("value of type %T cannot be bound", v)
}

// rowLevel reports whether err belongs to one row (constraint, type
// mismatch, too big) rather than the database.
func rowLevel(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrConstraint, sqlite3.ErrMismatch, sqlite3.ErrTooBig, sqlite3.ErrRange:
			return true
		}
	}
	return false
}

func (s *sqlSink) batchError(op string, err error) error {
	err = fmt.Errorf("route %s: sql sink: %s: %w", s.route, op, err)
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrBusy, sqlite3.ErrLocked, sqlite3.ErrIoErr, sqlite3.ErrFull, sqlite3.ErrProtocol:
			return runtime.Retryable(err)
		}
	}
	return err
}

func (s *sqlSink) Close() error {
	if s.server != nil {
		return s.server.Close()
	}
	if s.stmt != nil {
		s.conn.Raw(func(any) error {
			if s.multi != nil {
				s.multi.close()
			}
			return s.stmt.Close()
		})
	}
	s.conn.Close()
	return s.db.Close()
}

// createPrivate creates the SQLite database file (and its directory) for
// the user alone, 0600 in a 0700 directory, before SQLite would create it
// 0644: SQLite gives its -wal and -shm files the database file's mode.
// An existing file is left as it is.
func createPrivate(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the directory of %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return f.Close()
}

// compileInsert turns insert_query's parts into the driver's query text, every ${…}
// replaced by a bound-parameter placeholder (placeholder(n) for the n-th,
// 1-based), and the programs that compute the parameters: values are bound,
// never spliced into the SQL.
func compileInsert(b *runtime.BuildEnv, parts []plan.Part, placeholder func(n int) string) (string, []*runtime.Program, error) {
	if parts == nil {
		return "", nil, b.Errorf("insert_query", "required by this runtime (table-only inserts are not implemented)")
	}
	var q strings.Builder
	var params []*runtime.Program
	for _, p := range parts {
		if p.Expr == "" {
			q.WriteString(p.Lit)
			continue
		}
		prog, err := b.Compile(p.Expr)
		if err != nil {
			return "", nil, b.Errorf("insert_query", "${%s}: %v", p.Expr, err)
		}
		params = append(params, prog)
		q.WriteString(placeholder(len(params)))
	}
	return q.String(), params, nil
}
