package sql

import (
	"context"
	"crypto/sha256"
	dbsql "database/sql"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// sqlCursorSource reads a table (or a query) on a postgres:// or mysql://
// server page by page in cursor_column order:
//
//	SELECT <row as JSON>, col FROM (<table or query>) s WHERE col >= $next ORDER BY col LIMIT batch
//
// and then polls every poll_interval for rows past the last one. The cursor
// value is the record's position (Record.Seq) and what the checkpoint
// keeps: the route resumes at the first value not committed. That makes
// the source replayable, so the column must be a unique non-negative
// integer: a value that is not an integer, is negative, or repeats (two
// rows would be one position, and paging past it drops one of them) stops
// the route at read time with an error naming the value, rather than
// losing or misnaming records. Values may skip (ids deleted, sequences
// with gaps): the ack tracker treats a skipped value as acked.
//
// The database renders each row as a JSON object (to_jsonb in PostgreSQL,
// JSON_OBJECT in MySQL), so column types keep their JSON form. The record's
// message_id is derived from the table (or query) and the cursor value,
// the same on every read.
type sqlCursorSource struct {
	route   string
	log     *slog.Logger
	dialect sqlDialect
	rawURL  string
	url     string // redacted
	from    string // table name or (query)
	table   string // the table, for a table source
	name    string // what message ids and the checkpoint are derived from
	col     string
	poll    time.Duration

	pg    *pgx.Conn
	pgCfg *pgx.ConnConfig
	my    *dbsql.DB
	query string

	nextVal  uint64 // first cursor value not read yet
	prevLast int64  // cursor value of the last row read (-1: none this run)
	resumed  bool
	idBase   []byte
	// outboxRoute is set when the sink commits the position in its own
	// transactions (sqloutbox.go): open resumes from there too.
	outboxRoute string
	// transient failures in a row: a poll that fails for a dropped
	// connection is tried again after poll_interval, up to a limit.
	failures int

	// The check that no row arrives behind the cursor (source_behind.go).
	premise     string // the armed increasing_id premise's reason, for errors
	behind      int64  // rows at or below behindBound: counted, plus read since
	behindKnown bool   // false: not counted yet on a resumed position
	behindAt    time.Time
	behindCost  time.Duration
	caughtUp    bool // the last page was empty
}

var sqlIdentRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$`)

// sqlSourceConfig is a sql cursor source's attributes (stdlib declares
// them; the sink's are sqlSinkConfig).
type sqlSourceConfig struct {
	// URL may call env(): renderStatic renders it from the node, naming
	// the attribute in its errors.
	URL             []plan.Part   `attr:"url"`
	Table           string        `attr:"table"`
	Query           string        `attr:"query"`
	CursorColumn    string        `attr:"cursor_column"`
	PollInterval    time.Duration `attr:"poll_interval"`
	CheckpointStore string        `attr:"checkpoint_store"` // openCheckpointStore
}

func init() {
	runtime.RegisterSource("sql", func(b *runtime.BuildEnv, cfg *sqlSourceConfig) (runtime.Source, error) {
		return newSQLSource(b, cfg)
	})
	runtime.RegisterSink("sql", func(b *runtime.BuildEnv, cfg *sqlSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newSQLSink(b.Context(), b, cfg)
		if err != nil {
			return nil, nil, err
		}
		s.warnAbsent(b.Logger())
		if b.AbsorbsElidedDedup() {
			s.countAbsorbed()
		}
		return s, s.programs(), nil
	}, runtime.ChecksPremises(plan.PremiseUniqueKey, plan.PremiseReplaceStableColumns, plan.PremiseUpdateLeavesUniques, plan.PremiseTransactionalTable, plan.PremiseRepeatInsertable, plan.PremiseNoTriggers), runtime.ArmsPremises(plan.PremiseKeyPresent),
		runtime.ListsOutputs(sqliteOutputs))
}

func newSQLSource(b *runtime.BuildEnv, cfg *sqlSourceConfig) (*sqlCursorSource, error) {
	raw, err := b.RenderStatic("url")
	if err != nil {
		return nil, err
	}
	d := dialectOf(raw)
	if d == 0 {
		scheme, _, _ := strings.Cut(raw, "://")
		return nil, b.Errorf("url", "the sql cursor source reads postgres:// and mysql:// urls, not %s://", scheme)
	}
	s := &sqlCursorSource{route: b.Route(), log: b.Logger(), dialect: d, rawURL: raw, url: plan.RedactURLs(raw),
		col: cfg.CursorColumn, prevLast: -1, behindKnown: true}
	if s.col == "" {
		return nil, b.Errorf("cursor_column", "required: the source pages by it and keeps it as its position")
	}
	if !sqlIdentRE().MatchString(s.col) {
		return nil, b.Errorf("cursor_column", "%q is not a plain column name", s.col)
	}
	table, query := cfg.Table, strings.TrimSpace(cfg.Query)
	switch {
	case table != "" && query != "":
		return nil, b.Errorf("query", "give table or query, not both")
	case table != "":
		if !sqlIdentRE().MatchString(table) {
			return nil, b.Errorf("table", "%q is not a plain table name (use query for anything else)", table)
		}
		s.from, s.name, s.table = table, table, table
	case query != "":
		s.from, s.name = "("+strings.TrimSuffix(query, ";")+")", query
	default:
		return nil, b.Errorf("table", "table or query is required")
	}
	if s.poll = cfg.PollInterval; s.poll <= 0 {
		return nil, b.Errorf("poll_interval", "must be positive, got %v", s.poll)
	}
	s.idBase = []byte("sql:" + s.name + ":")
	return s, nil
}

func (s *sqlCursorSource) Name() string {
	name := strings.ReplaceAll(runtime.SafeName(s.name), "-", "_")
	if name == "" || len(name) > 40 {
		return "sql"
	}
	return name
}

func (s *sqlCursorSource) Replayable() bool     { return true }
func (s *sqlCursorSource) RecordFormat() string { return "json" }
func (s *sqlCursorSource) SeqGaps() bool        { return true }

func (s *sqlCursorSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	// Offset is the count of rows at or below the last committed value
	// (source_behind.go); 0 in a checkpoint written before it was kept.
	return checkpoint.Position{Source: "sql:" + s.name, Mode: "cursor:" + s.col, NextIndex: committed[0].Next, Offset: committed[0].Offset}, true
}

func (s *sqlCursorSource) Commit(context.Context, map[int32]runtime.AckPos) error { return nil }

func (s *sqlCursorSource) ResumeAt() map[int32]runtime.AckPos {
	return map[int32]runtime.AckPos{0: {Next: s.nextVal, Offset: s.behind}}
}

func (s *sqlCursorSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, _ runtime.SourceHost) error {
	if haveCP && cp.Source == "sql:"+s.name && cp.Mode == "cursor:"+s.col {
		s.nextVal, s.resumed = cp.NextIndex, true
		s.behind, s.behindKnown = cp.Offset, cp.Offset > 0
		s.log.Info("resuming from checkpoint", "cursor_column", s.col, "next_value", s.nextVal)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if s.dialect == dialectPostgres {
		cfg, err := pgx.ParseConfig(s.rawURL)
		if err != nil {
			return fmt.Errorf("route %s: sql source url %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
		}
		if cfg.ConnectTimeout == 0 {
			cfg.ConnectTimeout = 10 * time.Second
		}
		s.pgCfg = cfg
		s.query = `SELECT to_jsonb(mqb_src)::text, mqb_src.` + s.col + `::text FROM ` + s.from +
			` AS mqb_src WHERE mqb_src.` + s.col + ` >= $1 ORDER BY mqb_src.` + s.col + ` LIMIT $2`
		if err := s.connectPG(cctx); err != nil {
			return err
		}
		if s.outboxRoute != "" {
			if err := s.outboxResume(cctx); err != nil {
				return fmt.Errorf("route %s: sql source: read mqb_outbox on %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
			}
		}
		return s.check(cctx)
	}
	cfg, err := sqlkv.MySQLConfig(s.rawURL)
	if err != nil {
		return fmt.Errorf("route %s: sql source url: %v", s.route, err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("route %s: sql source url %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
	}
	s.my = dbsql.OpenDB(conn)
	s.my.SetMaxOpenConns(1)
	// JSON_OBJECT needs the column names: ask for an empty result.
	rows, err := s.my.QueryContext(cctx, `SELECT * FROM `+s.from+` AS mqb_src LIMIT 0`)
	if err != nil {
		return fmt.Errorf("route %s: sql source %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
	}
	cols, err := rows.Columns()
	rows.Close()
	if err != nil {
		return fmt.Errorf("route %s: sql source %s: %v", s.route, s.url, err)
	}
	var obj strings.Builder
	for i, c := range cols {
		if i > 0 {
			obj.WriteString(", ")
		}
		obj.WriteString("'" + strings.ReplaceAll(c, "'", "''") + "', mqb_src.`" + strings.ReplaceAll(c, "`", "``") + "`")
	}
	if s.outboxRoute != "" {
		if err := s.outboxResume(cctx); err != nil {
			return fmt.Errorf("route %s: sql source: read mqb_outbox on %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
		}
	}
	s.query = `SELECT JSON_OBJECT(` + obj.String() + `), CAST(mqb_src.` + s.col + ` AS CHAR) FROM ` + s.from +
		` AS mqb_src WHERE mqb_src.` + s.col + ` >= ? ORDER BY mqb_src.` + s.col + ` LIMIT ? LOCK IN SHARE MODE`
	return s.check(cctx)
}

// check runs the page query once, empty, so a wrong table, query or column
// fails the route at start-up; and on a resumed position, counts the rows
// behind the cursor, so that rows inserted there while the route was down
// stop it before it reads on past them.
func (s *sqlCursorSource) check(ctx context.Context) error {
	err := s.page(ctx, 0, 0, func(string, string) error { return nil })
	if err == nil {
		_, _, err = s.inFlight(ctx) // the privilege it needs, at start-up
	}
	if err == nil {
		err = s.checkBehind(ctx, true)
	}
	if ec, ok := err.(*errCursor); ok {
		return fmt.Errorf("route %s: sql source %s: %s", s.route, s.name, ec.msg)
	}
	if err != nil {
		return fmt.Errorf("route %s: sql source %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
	}
	return nil
}

func (s *sqlCursorSource) connectPG(ctx context.Context) error {
	c, err := pgx.ConnectConfig(ctx, s.pgCfg)
	if err != nil {
		return fmt.Errorf("route %s: sql source: connect to %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
	}
	s.pg = c
	return nil
}

// page runs the page query from cursor value lo, calling row for each
// (JSON object, cursor value as text).
func (s *sqlCursorSource) page(ctx context.Context, lo int64, limit int, row func(obj, cur string) error) error {
	if s.dialect == dialectPostgres {
		if s.pg == nil || s.pg.IsClosed() {
			if err := s.connectPG(ctx); err != nil {
				return err
			}
		}
		rows, err := s.pg.Query(ctx, s.query, lo, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var obj string
			var cur *string
			if err := rows.Scan(&obj, &cur); err != nil {
				return err
			}
			if cur == nil {
				continue // NULL never passes >=: not reached
			}
			if err := row(obj, *cur); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	rows, err := s.my.QueryContext(ctx, s.query, lo, limit)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var obj string
		var cur dbsql.NullString
		if err := rows.Scan(&obj, &cur); err != nil {
			return err
		}
		if !cur.Valid {
			continue
		}
		if err := row(obj, cur.String); err != nil {
			return err
		}
	}
	return rows.Err()
}

// errCursor is a cursor value the source cannot take as a position.
type errCursor struct{ msg string }

func (e *errCursor) Error() string { return e.msg }

// Next reads the next page. Once a run has read a row, the page starts at
// that row's value again, so a second row with the same value is seen and
// refused instead of being paged past. A page is passed on only when no
// transaction that may still commit a row below its last value is
// running (source_inflight.go): otherwise the source waits for them and
// reads the page again, up to that value.
func (s *sqlCursorSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	for {
		nextVal, prevLast, behind := s.nextVal, s.prevLast, s.behind
		var b *runtime.Batch
		err := s.checkBehind(ctx, s.caughtUp)
		if err == nil {
			b, err = s.readPage(ctx, max, math.MaxInt64)
		}
		if err == nil && b.Len() > 0 {
			var ids []string
			var vxid bool
			if ids, vxid, err = s.inFlight(ctx); err == nil && len(ids) > 0 {
				upTo := s.prevLast
				if err = s.waitInFlight(ctx, ids, vxid, upTo); err == nil {
					s.nextVal, s.prevLast, s.behind = nextVal, prevLast, behind
					b, err = s.readPage(ctx, max, upTo)
				}
			}
		}
		if err != nil {
			if ec, ok := err.(*errCursor); ok {
				return nil, false, fmt.Errorf("route %s: sql source %s: %s", s.route, s.name, ec.msg)
			}
			s.nextVal, s.prevLast, s.behind = nextVal, prevLast, behind
			if ctx.Err() != nil {
				return runtime.NewBatch(0), false, nil
			}
			s.failures++
			if classifySource(s.dialect, err) && s.failures < 30 {
				s.log.Warn("sql source poll failed, retrying", "err", plan.RedactURLs(err.Error()), "attempt", s.failures)
				if s.pg != nil {
					s.pg.Close(context.Background())
				}
				if !sleepCtx(ctx, s.poll) {
					return runtime.NewBatch(0), false, nil
				}
				continue
			}
			return nil, false, fmt.Errorf("route %s: sql source %s: %s", s.route, s.url, plan.RedactURLs(err.Error()))
		}
		s.failures = 0
		s.caughtUp = b.Len() == 0
		if b.Len() > 0 {
			return b, false, nil
		}
		if !sleepCtx(ctx, s.poll) {
			return b, false, nil
		}
	}
}

// readPage reads up to max rows from where the source stands, none with a
// cursor value above upTo, and moves the source past them.
func (s *sqlCursorSource) readPage(ctx context.Context, max int, upTo int64) (*runtime.Batch, error) {
	b := runtime.NewBatch(min(max, 1024))
	// A fresh start reads from the lowest value there is, so that a
	// negative one is seen (and refused) rather than skipped.
	lo := int64(s.nextVal)
	if s.prevLast >= 0 {
		lo = s.prevLast
	} else if s.nextVal == 0 {
		lo = math.MinInt64
	}
	pagePrev, first := s.prevLast, true
	err := s.page(ctx, lo, max+1, func(obj, cur string) error {
		isFirst := first
		first = false
		v, err := strconv.ParseUint(cur, 10, 64)
		if err != nil || v > 1<<63-1 {
			return &errCursor{fmt.Sprintf("cursor_column %s: value %q is not a non-negative integer; the position of a sql source is its cursor value, so the column must be a unique non-negative integer", s.col, cur)}
		}
		if isFirst && pagePrev >= 0 && v == uint64(pagePrev) {
			return nil // the last row of the previous page
		}
		if v < s.nextVal {
			return &errCursor{fmt.Sprintf("cursor_column %s: value %d repeats (or the rows came out of order); the column must be unique: two rows with one value would be one position", s.col, v)}
		}
		if b.Len() == max || int64(v) > upTo {
			return nil
		}
		s.behind++
		r := runtime.Record{Payload: []byte(obj), Seq: v, Next: s.behind}
		r.SetMessageID(s.messageID(cur))
		b.Add(r)
		s.nextVal = v + 1
		s.prevLast = int64(v)
		return nil
	})
	return b, err
}

func classifySource(d sqlDialect, err error) bool { return d.classify(err) == sqlRetryable }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// messageID is a stable id for (table or query, cursor value).
func (s *sqlCursorSource) messageID(cur string) uuid.UUID {
	h := sha256.New()
	h.Write(s.idBase)
	h.Write([]byte(cur))
	var id uuid.UUID
	copy(id[:], h.Sum(nil))
	id[6] = (id[6] & 0x0f) | 0x80 // version 8: custom
	id[8] = (id[8] & 0x3f) | 0x80
	return id
}

func (s *sqlCursorSource) Close() error {
	if s.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.pg.Close(ctx)
	}
	if s.my != nil {
		return s.my.Close()
	}
	return nil
}

// sqliteOutputs is the SQLite database a sql sink writes, for `mqbc
// state` (a server's database is not a local file).
func sqliteOutputs(b *runtime.BuildEnv, _ *sqlSinkConfig) []runtime.OutputState {
	url, err := b.RenderStatic("url")
	if err != nil {
		return nil
	}
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		return nil
	}
	path, _, _ = strings.Cut(path, "?")
	if path == "" || strings.HasPrefix(path, ":memory:") {
		return nil
	}
	path = runtime.LocalPath(b, path)
	return []runtime.OutputState{{Path: path, Label: "SQLite database", Gone: runtime.OutputGone(path, false)}}
}
