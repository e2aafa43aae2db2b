package clickhouse

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	chgo "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// clickhouseSink inserts each write as one native-protocol batch with an
// explicit column list. ClickHouse has no unique constraint: a repeat is
// absorbed only by a ReplacingMergeTree table (rows with the same sorting
// key collapse at merge time, keeping the highest version), which the sink
// reads from system.tables at start-up. A route planned effectively-once
// refuses to start against any other engine.
type clickhouseSink struct {
	route  string
	node   string // plan node ID, for premises
	db     string
	table  string
	engine string
	conn   driver.Conn
	insert string
	cols   []chColumn
}

// chColumn is one column of the INSERT and how a record fills it.
type chColumn struct {
	name    string
	typ     string
	prog    *runtime.Program // columns block or version: an expression
	field   string           // default: the payload's top-level field of the column's name
	isConst bool
	constV  any
	conv    func(any) (any, error)
	key     bool // armed by PremiseKeyPresent: never without a value
}

const (
	chDialTimeout  = 10 * time.Second
	chReadTimeout  = 60 * time.Second
	chWriteTimeout = 60 * time.Second
)

// deadlineConn puts a write deadline on every write of a connection; the
// driver sets read deadlines itself (ReadTimeout). An old server that does
// not understand a request never answers it: without both, a client waits
// forever.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c deadlineConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "`", "\\`") + "`"
}

// rmtVersionRE finds the version column in a ReplacingMergeTree engine.
var rmtVersionRE = lazyre.New(`ReplacingMergeTree\((?:[^,()]*,\s*)*\s*'?` + "`?" + `([A-Za-z_][A-Za-z0-9_]*)` + "`?" + `'?\s*\)`)

// clickhouseSinkConfig is a clickhouse sink's attributes (stdlib declares
// them).
type clickhouseSinkConfig struct {
	URL     []plan.Part `attr:"url"` // rendered by renderStatic (env() allowed)
	Table   string      `attr:"table"`
	Columns plan.Value  `attr:"columns"` // a block of column = <expr>; empty when unset
	Version string      `attr:"version"` // an expression
}

func init() {
	runtime.RegisterSink("clickhouse", func(b *runtime.BuildEnv, cfg *clickhouseSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newClickHouseSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.programs(), nil
	}, runtime.ChecksPremises(plan.PremiseReplacingMergeTree, plan.PremiseNoTriggers), runtime.ArmsPremises(plan.PremiseKeyPresent))
}

func newClickHouseSink(b *runtime.BuildEnv, cfg *clickhouseSinkConfig) (*clickhouseSink, error) {
	ctx := b.Context()
	raw, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "clickhouse" && u.Scheme != "tcp") || u.Host == "" {
		return nil, b.Errorf("url", "%s: want clickhouse://user:pass@host:9000/db", plan.RedactURLs(raw))
	}
	s := &clickhouseSink{route: b.Route(), node: b.NodeID(), db: strings.Trim(u.Path, "/"), table: cfg.Table}
	if s.db == "" {
		s.db = "default"
	}
	if s.table == "" {
		return nil, b.Errorf("table", "required")
	}
	if db, tbl, ok := strings.Cut(s.table, "."); ok {
		s.db, s.table = db, tbl
	}
	pass, _ := u.User.Password()
	user := u.User.Username()
	if user == "" {
		user = "default"
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "9000")
	}
	dialer := &net.Dialer{Timeout: chDialTimeout}
	s.conn, err = chgo.Open(&chgo.Options{
		Addr:        []string{host},
		Auth:        chgo.Auth{Database: s.db, Username: user, Password: pass},
		DialTimeout: chDialTimeout,
		ReadTimeout: chReadTimeout,
		DialContext: func(ctx context.Context, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			return deadlineConn{Conn: conn, timeout: chWriteTimeout}, nil
		},
	})
	if err != nil {
		return nil, b.Errorf("url", "open %s: %s", plan.RedactURLs(raw), plan.RedactURLs(err.Error()))
	}
	fail := func(attr, format string, args ...any) (*clickhouseSink, error) {
		s.conn.Close()
		return nil, b.Errorf(attr, format, args...)
	}
	qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var engineFull string
	if err := s.conn.QueryRow(qctx, `SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?`,
		s.db, s.table).Scan(&s.engine, &engineFull); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fail("table", "table %s.%s does not exist on %s", s.db, s.table, host)
		}
		return fail("url", "read the engine of %s.%s from system.tables on %s: %s", s.db, s.table, host, plan.RedactURLs(err.Error()))
	}
	rows, err := s.conn.Query(qctx, `SELECT name, type, default_kind FROM system.columns WHERE database = ? AND table = ?`, s.db, s.table)
	if err != nil {
		return fail("table", "read the columns of %s.%s: %s", s.db, s.table, plan.RedactURLs(err.Error()))
	}
	type tableCol struct{ name, typ, defaultKind string }
	var tcols []tableCol
	types := map[string]string{}
	for rows.Next() {
		var tc tableCol
		if err := rows.Scan(&tc.name, &tc.typ, &tc.defaultKind); err != nil {
			rows.Close()
			return fail("table", "read the columns of %s.%s: %v", s.db, s.table, err)
		}
		tcols = append(tcols, tc)
		types[tc.name] = tc.typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fail("table", "read the columns of %s.%s: %v", s.db, s.table, err)
	}

	addColumn := func(attr string, col chColumn) error {
		typ, ok := types[col.name]
		if !ok {
			return b.Errorf(attr, "table %s.%s has no column %s", s.db, s.table, col.name)
		}
		conv, err := chConverter(typ)
		if err != nil {
			return b.Errorf(attr, "column %s: %v", col.name, err)
		}
		col.typ, col.conv = typ, conv
		s.cols = append(s.cols, col)
		return nil
	}

	// The version column gets the version expression.
	versionCol := ""
	if src := cfg.Version; src != "" {
		m := rmtVersionRE().FindStringSubmatch(engineFull)
		if m == nil {
			return fail("version", "table %s.%s has engine %s, which has no version column to write", s.db, s.table, engineFull)
		}
		versionCol = m[1]
		prog, err := b.Compile(src)
		if err != nil {
			return fail("version", "%v", err)
		}
		if err := addColumn("version", chColumn{name: versionCol, prog: prog}); err != nil {
			s.conn.Close()
			return nil, err
		}
	}
	if v := cfg.Columns; len(v.Block) > 0 {
		names := make([]string, 0, len(v.Block))
		for k := range v.Block {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			if name == versionCol {
				return fail("columns", "column %s is the version column, filled by version", name)
			}
			col := chColumn{name: name}
			cv := v.Block[name]
			src := cv.Expr
			if src == "" && cv.Type == plan.TTemplate && len(cv.Template) == 1 && cv.Template[0].Expr != "" {
				src = cv.Template[0].Expr
			}
			if src != "" {
				if col.prog, err = b.Compile(src); err != nil {
					return fail("columns", "%s: %v", name, err)
				}
			} else if col.constV, err = runtime.Literal(cv); err != nil {
				return fail("columns", "%s: %v", name, err)
			} else {
				col.isConst = true
			}
			if err := addColumn("columns", col); err != nil {
				s.conn.Close()
				return nil, err
			}
		}
	} else {
		// The payload's top-level fields, one per written column. Columns
		// computed by the server (MATERIALIZED, ALIAS) cannot be written;
		// a DEFAULT column is left to the server.
		for _, tc := range tcols {
			if tc.defaultKind != "" || tc.name == versionCol {
				continue
			}
			if err := addColumn("table", chColumn{name: tc.name, field: tc.name}); err != nil {
				s.conn.Close()
				return nil, err
			}
		}
	}
	if len(s.cols) == 0 {
		return fail("columns", "no column to insert into %s.%s", s.db, s.table)
	}
	names := make([]string, len(s.cols))
	for i, col := range s.cols {
		names[i] = quoteIdent(col.name)
	}
	s.insert = fmt.Sprintf("INSERT INTO %s.%s (%s)", quoteIdent(s.db), quoteIdent(s.table), strings.Join(names, ", "))
	verdict := plan.AtLeastOnce
	if s.replacing() {
		verdict = plan.EffectivelyOnce
	}
	b.Logger().Info("clickhouse table verified", "table", s.db+"."+s.table, "engine", s.engine,
		"verdict", verdict, "insert", s.insert)
	return s, nil
}

// replacing is true when the table collapses repeats of a sorting key.
func (s *clickhouseSink) replacing() bool {
	return strings.HasSuffix(s.engine, "ReplacingMergeTree")
}

func (s *clickhouseSink) VerifyGuarantee(guarantee string) error {
	if guarantee == plan.EffectivelyOnce && !s.replacing() {
		return fmt.Errorf("route %s: clickhouse table %s.%s has engine %s, not ReplacingMergeTree: a replayed record would be stored twice, so the route cannot be effectively-once; create the table with ENGINE = ReplacingMergeTree(version), or plan the route at-least-once",
			s.route, s.db, s.table, s.engine)
	}
	return nil
}

func (s *clickhouseSink) programs() []*runtime.Program {
	var ps []*runtime.Program
	for _, c := range s.cols {
		if c.prog != nil {
			ps = append(ps, c.prog)
		}
		if c.field != "" {
			// Not run: it tells the route to decode payloads.
			ps = append(ps, runtime.FieldProgram(c.field))
		}
	}
	return ps
}

// row renders r's values in column order.
func (s *clickhouseSink) row(ev *runtime.Evaluator, r *runtime.Record, out []any) error {
	for i, col := range s.cols {
		var v any
		switch {
		case col.isConst:
			v = col.constV
		case col.prog != nil:
			x, present, err := ev.Run(col.prog, r)
			if err != nil {
				return fmt.Errorf("column %s: %w", col.name, err)
			}
			if present {
				v = x
			}
		default:
			x, ok := r.Field(col.field)
			if !ok {
				return fmt.Errorf("payload is not a JSON object")
			}
			v = x
		}
		if v == nil && col.key {
			return fmt.Errorf("key column %s would have no value; a replay could not be collapsed with it", col.name)
		}
		cv, err := col.conv(v)
		if err != nil {
			return fmt.Errorf("column %s (%s): %w", col.name, col.typ, err)
		}
		out[i] = cv
	}
	return nil
}

func (s *clickhouseSink) Write(ctx context.Context, recs []*runtime.Record) error {
	var ev runtime.Evaluator
	// One array holds every row's values: a slice a row was an allocation
	// a record.
	cells := make([]any, len(recs)*len(s.cols))
	rows := make([][]any, 0, len(recs))
	for i, r := range recs {
		row := cells[i*len(s.cols) : (i+1)*len(s.cols) : (i+1)*len(s.cols)]
		if err := s.row(&ev, r, row); err != nil {
			r.Refuse("clickhouse: " + err.Error())
			continue
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	batch, err := s.conn.PrepareBatch(wctx, s.insert)
	if err != nil {
		return s.batchError("prepare", err)
	}
	for i, row := range rows {
		if err := batch.Append(row...); err != nil {
			batch.Abort()
			// Values are converted to the column types first, so a value
			// the driver refuses is a bug here, not a bad record: fail the
			// batch rather than guess which record it was.
			return fmt.Errorf("route %s: clickhouse %s.%s: append row %d: %w", s.route, s.db, s.table, i, err)
		}
	}
	if err := batch.Send(); err != nil {
		return s.batchError("insert", err)
	}
	return nil
}

// batchError wraps a failed batch, retryable unless the server refused it
// for a reason a retry will not change.
func (s *clickhouseSink) batchError(op string, err error) error {
	werr := fmt.Errorf("route %s: clickhouse %s.%s: %s: %s", s.route, s.db, s.table, op, plan.RedactURLs(err.Error()))
	var ex *chgo.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case 159, 202, 209, 210, 252: // timeout, too many queries, socket timeout, network, too many parts
			return runtime.Retryable(werr)
		}
		return werr
	}
	return runtime.Retryable(werr)
}

func (s *clickhouseSink) Close() error { return s.conn.Close() }

// ReleasesRecords says the sink keeps nothing of a record once Write
// returned (see runtime.ReleasingSink), so the route reuses its batches
// and decodes payload fields into them without an allocation a value.
// Write appends each row to a batch the driver makes for that write from
// the server's first block, and drops it: the driver copies a String's
// bytes into its column buffer (a LowCardinality column's dictionary map,
// which holds the strings as given, belongs to that batch's block), the
// conversions copy the rest (numbers, times, parsed UUIDs, marshalled
// objects), and Send returns only once the block was written, stopping
// its context watchdog first. A retried write converts the records again.
func (s *clickhouseSink) ReleasesRecords() bool { return true }

var _ runtime.ReleasingSink = (*clickhouseSink)(nil)

// chConverter returns the conversion of a decoded JSON value (nil, bool,
// int64, float64, string, []any, map[string]any) or an expression value to
// the Go type the driver binds for a ClickHouse column type.
func chConverter(typ string) (func(any) (any, error), error) {
	if inner, ok := unwrapType(typ, "LowCardinality"); ok {
		return chConverter(inner)
	}
	if inner, ok := unwrapType(typ, "Nullable"); ok {
		conv, err := chConverter(inner)
		if err != nil {
			return nil, err
		}
		return func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			return conv(v)
		}, nil
	}
	notNull := func(conv func(any) (any, error)) func(any) (any, error) {
		return func(v any) (any, error) {
			if v == nil {
				return nil, errors.New("no value for a non-Nullable column")
			}
			return conv(v)
		}
	}
	intConv := func(bits int, signed bool, cast func(int64, uint64) any) func(any) (any, error) {
		return notNull(func(v any) (any, error) {
			var i int64
			var u uint64
			switch x := v.(type) {
			case int64:
				i, u = x, uint64(x)
				if !signed && x < 0 {
					return nil, fmt.Errorf("%d is negative", x)
				}
			case int:
				i, u = int64(x), uint64(x)
				if !signed && x < 0 {
					return nil, fmt.Errorf("%d is negative", x)
				}
			case uint64:
				if signed && x > math.MaxInt64 {
					return nil, fmt.Errorf("%d out of range", x)
				}
				i, u = int64(x), x
			case json.Number:
				// An integer past uint64, or a number float64 cannot
				// hold: out of range for every integer column.
				return nil, fmt.Errorf("%s out of range", x)
			case float64:
				if x != math.Trunc(x) {
					return nil, fmt.Errorf("%v is not an integer", x)
				}
				// Past 64 bits the conversion would wrap.
				if x >= 1<<64 || (signed && (x >= 1<<63 || x < -(1<<63))) {
					return nil, fmt.Errorf("%v out of range", x)
				}
				if !signed && x < 0 {
					return nil, fmt.Errorf("%v is negative", x)
				}
				i, u = int64(x), uint64(x)
			case bool:
				if x {
					i, u = 1, 1
				}
			case string:
				var err error
				if signed {
					i, err = strconv.ParseInt(x, 10, bits)
					u = uint64(i)
				} else {
					u, err = strconv.ParseUint(x, 10, bits)
					i = int64(u)
				}
				if err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("cannot store %T", v)
			}
			if signed && bits < 64 && (i < -(1<<(bits-1)) || i >= 1<<(bits-1)) {
				return nil, fmt.Errorf("%d out of range", i)
			}
			if !signed && bits < 64 && u >= 1<<bits {
				return nil, fmt.Errorf("%d out of range", u)
			}
			if _, ok := v.(int64); ok && signed && bits == 64 {
				return v, nil // its own box: i as an any would be another
			}
			return cast(i, u), nil
		})
	}
	switch typ {
	case "Int8":
		return intConv(8, true, func(i int64, _ uint64) any { return int8(i) }), nil
	case "Int16":
		return intConv(16, true, func(i int64, _ uint64) any { return int16(i) }), nil
	case "Int32":
		return intConv(32, true, func(i int64, _ uint64) any { return int32(i) }), nil
	case "Int64":
		return intConv(64, true, func(i int64, _ uint64) any { return i }), nil
	case "UInt8":
		return intConv(8, false, func(_ int64, u uint64) any { return uint8(u) }), nil
	case "UInt16":
		return intConv(16, false, func(_ int64, u uint64) any { return uint16(u) }), nil
	case "UInt32":
		return intConv(32, false, func(_ int64, u uint64) any { return uint32(u) }), nil
	case "UInt64":
		return intConv(64, false, func(_ int64, u uint64) any { return u }), nil
	case "Float32", "Float64":
		return notNull(func(v any) (any, error) {
			var f float64
			switch x := v.(type) {
			case float64:
				f = x
			case int64:
				f = float64(x)
			case int:
				f = float64(x)
			case uint64:
				f = float64(x)
			case json.Number:
				var err error
				if f, err = strconv.ParseFloat(string(x), 64); err != nil {
					return nil, err
				}
			case string:
				var err error
				if f, err = strconv.ParseFloat(x, 64); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("cannot store %T", v)
			}
			if typ == "Float32" {
				return float32(f), nil
			}
			return f, nil
		}), nil
	case "String":
		return notNull(func(v any) (any, error) {
			switch x := v.(type) {
			case string:
				return v, nil // its own box: x as an any would be another
			case map[string]any, []any:
				b, err := json.Marshal(x)
				return string(b), err
			}
			return runtime.Stringify(v)
		}), nil
	case "UUID":
		return notNull(func(v any) (any, error) {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("cannot store %T", v)
			}
			return uuid.Parse(s)
		}), nil
	case "Date":
		return notNull(func(v any) (any, error) { return chTime(v, true) }), nil
	}
	if strings.HasPrefix(typ, "DateTime(") || typ == "DateTime" {
		return notNull(func(v any) (any, error) { return chTime(v, false) }), nil
	}
	if strings.HasPrefix(typ, "FixedString(") {
		return notNull(func(v any) (any, error) {
			if s, ok := v.(string); ok {
				return s, nil
			}
			return nil, fmt.Errorf("cannot store %T", v)
		}), nil
	}
	return nil, fmt.Errorf("type %s is not supported by the clickhouse sink", typ)
}

func unwrapType(typ, wrapper string) (string, bool) {
	if strings.HasPrefix(typ, wrapper+"(") && strings.HasSuffix(typ, ")") {
		return typ[len(wrapper)+1 : len(typ)-1], true
	}
	return "", false
}

// chTime reads a time from RFC 3339 text, "2006-01-02 15:04:05",
// "2006-01-02", or Unix seconds.
func chTime(v any, date bool) (time.Time, error) {
	switch x := v.(type) {
	case time.Time:
		return x, nil
	case int64:
		return time.Unix(x, 0).UTC(), nil
	case float64:
		sec, frac := math.Modf(x)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02"} {
			if t, err := time.Parse(layout, x); err == nil {
				return t, nil
			}
		}
		return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339, 2006-01-02 15:04:05 or 2006-01-02)", x)
	}
	return time.Time{}, fmt.Errorf("cannot store %T as a time", v)
}
