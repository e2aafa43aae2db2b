package sql

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/runtime"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/plan"
)

// Staged inserts: a PostgreSQL sink whose insert_query is one VALUES row
// sends each batch as one array per parameter and runs the user's
// statement once over them:
//
//	INSERT INTO orders (id, amount) VALUES (${payload.id}, ${payload.amount}) ON CONFLICT (id) DO NOTHING
//
// becomes a statement prepared once per connection,
//
//	INSERT INTO orders (id, amount) SELECT mqb_stage.p1, mqb_stage.p2
//	FROM unnest($1, $2) WITH ORDINALITY AS mqb_stage(p1, p2, mqb_ord)
//	ORDER BY mqb_stage.mqb_ord ON CONFLICT (id) DO NOTHING
//
// each array of the type of the parameter as the server typed it when it
// prepared insert_query ($1 text[], $2 bigint[] here, given with
// Prepare), sent in binary when each of its elements has a binary form
// the server reads as it reads the element's text (stageArrays,
// pgbinary.go), which spares the server parsing array text (about a
// tenth of its time on a keyed upsert). The server parses, plans and
// checks constraints once per chunk of rows rather than once per row, and
// nothing is staged in a table: no COPY round trip, no temporary table
// to create or empty at commit. (COPY into a session temporary table
// and one INSERT … SELECT … ORDER BY per batch was measured against this
// on file → PostgreSQL upserts of a million rows: slower, since the
// statement cannot start before the COPY ends, and no cheaper for the
// server. Most of the server's time is the keyed insert itself, which
// neither form changes.) The rows go in read order (at concurrency above
// 1, in key order, the repeats of a key still in read order:
// lockorder.go), so a conflict clause resolves repeats as the row-by-row
// inserts would (the first one inserted, the next ones doing nothing);
// what a single statement cannot do the same way fails it, and the batch
// is written again by the row-by-row path, which isolates a refused row:
//
//   - a row the server refuses (a constraint, a bad value) fails the whole
//     statement;
//   - ON CONFLICT DO UPDATE cannot touch one row twice in a statement
//     (21000): a chunk holding a key twice is written row by row, so an
//     accumulating update adds both.
//
// A batch is cut into chunks of stageChunk rows sent in pipeline mode in
// one transaction (with the outbox position, if any): the server runs
// chunk N while the sink encodes and sends chunk N+1, and the batch costs
// one commit. Write returns once that transaction committed, so the
// engine acks the batch only then, in read order. A failing chunk rolls
// the batch back and the row-by-row path writes it.
//
// Only statements of exactly that shape are staged: INSERT INTO t [(cols)]
// VALUES (…) followed by nothing that reads a parameter (DO UPDATE SET may
// name only the target and EXCLUDED), no RETURNING, no second statement,
// no dollar quoting. report_outcome needs each row's count and bulk_copy
// has its own COPY, so neither is staged. A parameter typed as an array
// or a row (unnest would flatten or expand it), or a statement the
// staging form makes the server reject for a reason that is no row's,
// turns staging off for the sink.

// pgStageStmt names the staged statement on each connection.
const pgStageStmt = "mqb_stage"

// stageChunk is how many rows one staged statement carries: small enough
// that a batch group makes several chunks to overlap, large enough that
// the per-statement cost (bind, executor start) is spread thin.
const stageChunk = 512

// pgStaged is a staged insert: the statement over the parameter arrays
// is head + FROM unnest(…) + tail (statement).
type pgStaged struct {
	head, tail string
	params     int
}

// statement is the staged statement over n parameter arrays. Their types
// go with Prepare (the array types of insert_query's parameters), not as
// casts in the text: a cast to a type without its modifier would cut a
// value short without a word (character means character(1)), where the
// assignment to the column refuses it as the row-by-row insert does.
func (st pgStaged) statement() string {
	var q strings.Builder
	q.WriteString(st.head + " FROM unnest(")
	for i := range st.params {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("$" + strconv.Itoa(i+1))
	}
	q.WriteString(") WITH ORDINALITY AS " + pgStageStmt + "(")
	for i := range st.params {
		q.WriteString("p" + strconv.Itoa(i+1) + ", ")
	}
	q.WriteString("mqb_ord) ORDER BY " + pgStageStmt + ".mqb_ord" + st.tail)
	return q.String()
}

// stageMark stands for parameter n while the statement is rewritten: a
// byte no SQL text carries.
func stageMark(n int) string { return "\x00" + strconv.Itoa(n) + "\x00" }

var (
	stageMarkRE   = lazyre.New("\x00([0-9]+)\x00")
	stagePrefixRE = lazyre.New(`(?is)^\s*INSERT\s+INTO\s+[^\s(]+\s*(\([^()]*\))?\s*$`)
	returningRE   = lazyre.New(`(?i)\bRETURNING\b`)
)

// markedSQL is insert_query's text with each parameter written as its
// stageMark, and how many there are; not ok when there are none, or a
// literal holds the byte the marks are made of.
func markedSQL(parts []plan.Part) (sql string, n int, ok bool) {
	var q strings.Builder
	for _, p := range parts {
		if p.Expr == "" {
			if strings.ContainsRune(p.Lit, 0) {
				return "", 0, false
			}
			q.WriteString(p.Lit)
			continue
		}
		n++
		q.WriteString(stageMark(n))
	}
	return q.String(), n, n > 0
}

// stagedInsert rewrites insert_query's parts into the staged statement,
// or says it cannot.
func stagedInsert(parts []plan.Part) (pgStaged, bool) {
	sql, n, ok := markedSQL(parts)
	if !ok {
		return pgStaged{}, false
	}
	at, open, closing, ok := valuesRow(sql)
	if !ok || !stagePrefixRE().MatchString(sql[:at]) {
		return pgStaged{}, false
	}
	rest := sql[closing+1:]
	trimmed := strings.TrimSpace(rest)
	switch {
	case strings.HasPrefix(trimmed, ","), // several VALUES rows
		stageMarkRE().MatchString(rest), // DO UPDATE SET … = ${…}
		returningRE().MatchString(rest): // rows the sink would not read
		return pgStaged{}, false
	}
	row := stageMarkRE().ReplaceAllString(sql[open+1:closing], pgStageStmt+".p$1")
	return pgStaged{head: sql[:at] + "SELECT " + row, tail: rest, params: n}, true
}

// valuesRow finds the VALUES keyword and its row's parentheses in sql,
// outside quotes. It fails on dollar quoting, a second statement, or
// anything it cannot follow.
func valuesRow(sql string) (at, open, closing int, ok bool) {
	at, open = -1, -1
	depth := 0
	for i := 0; i < len(sql); i++ {
		switch c := sql[i]; c {
		case '\'', '"':
			if c == '\'' && i > 0 && (sql[i-1] == 'e' || sql[i-1] == 'E') && wordEdge(sql, i-2) {
				return 0, 0, 0, false // E'…' strings escape quotes with backslashes
			}
			j := strings.IndexByte(sql[i+1:], c)
			if j < 0 {
				return 0, 0, 0, false
			}
			i += j + 1 // a doubled quote is two quoted runs in a row
		case '$', ';':
			return 0, 0, 0, false
		case '-', '/':
			if i+1 < len(sql) && (c == '-' && sql[i+1] == '-' || c == '/' && sql[i+1] == '*') {
				return 0, 0, 0, false // comments: not worth following
			}
		case '(':
			if depth == 0 && at >= 0 && open < 0 {
				if strings.TrimSpace(sql[at+len("VALUES"):i]) != "" {
					return 0, 0, 0, false
				}
				open = i
			}
			depth++
		case ')':
			depth--
			if depth < 0 {
				return 0, 0, 0, false
			}
			if depth == 0 && open >= 0 && closing == 0 {
				closing = i
			}
		default:
			if depth == 0 && at < 0 && (c == 'v' || c == 'V') && i+6 <= len(sql) &&
				strings.EqualFold(sql[i:i+6], "VALUES") && wordEdge(sql, i-1) && wordEdge(sql, i+6) {
				at = i
			}
		}
	}
	return at, open, closing, at >= 0 && open > 0 && closing > open && depth == 0
}

func wordEdge(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return true
	}
	c := s[i]
	return !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
}

// errStageUnfit: a parameter's type cannot go through unnest.
var errStageUnfit = errors.New("staged insert: a parameter is typed as an array or a row, or has no array type")

// stageTypes asks the server, on c, for the array type and the array
// delimiter of each parameter of insert_query as it prepared it.
func stageTypes(ctx context.Context, c *pgConn) (arrays []uint32, delims []byte, err error) {
	var q strings.Builder
	q.WriteString("SELECT t.typarray, t.typdelim, t.typcategory IN ('A', 'C') OR t.typtype IN ('c', 'p')" +
		" FROM unnest('{")
	for i, oid := range c.stmt.ParamOIDs {
		if i > 0 {
			q.WriteByte(',')
		}
		if oid == 0 || oid == 705 { // unknown: the server did not infer one
			oid = 25 // text
		}
		q.WriteString(strconv.FormatUint(uint64(oid), 10))
	}
	q.WriteString("}'::oid[]) WITH ORDINALITY AS u(o, i) JOIN pg_type t ON t.oid = u.o ORDER BY u.i")
	res, err := c.conn.Exec(ctx, q.String()).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(res) != 1 || len(res[0].Rows) != len(c.stmt.ParamOIDs) {
		return nil, nil, errors.New("staged insert: parameter types not listed")
	}
	for _, row := range res[0].Rows {
		array, err := strconv.ParseUint(string(row[0]), 10, 32)
		if err != nil || array == 0 || string(row[2]) != "f" || len(row[1]) != 1 {
			return nil, nil, errStageUnfit
		}
		arrays = append(arrays, uint32(array))
		delims = append(delims, row[1][0])
	}
	return arrays, delims, nil
}

// stageReady prepares the staged statement on c, learning the parameter
// types on the first connection that needs them.
func (s *sqlServerSink) stageReady(ctx context.Context, c *pgConn) error {
	if c.staged {
		return nil
	}
	s.stageMu.Lock()
	defer s.stageMu.Unlock()
	if s.stageOIDs == nil {
		arrays, delims, err := stageTypes(ctx, c)
		if err != nil {
			return err
		}
		s.stageOIDs, s.stageDelims = arrays, delims
		s.stageElems = make([]uint32, len(arrays))
		for j, oid := range c.stmt.ParamOIDs {
			if oid == 0 || oid == oidUnknown { // typed text by stageTypes
				oid = oidText
			}
			s.stageElems[j] = oid
		}
	}
	if _, err := c.conn.Prepare(ctx, pgStageStmt, s.stage.statement(), s.stageOIDs); err != nil {
		return err
	}
	c.staged = true
	return nil
}

// stageArrays encodes the rows live[...] as one array per parameter into
// args, reusing its buffers, and sets each one's format: binary when
// every element has a binary form the server reads as it reads the
// element's text (pgbinary.go), which spares the server parsing the
// array's text; text otherwise.
func (s *sqlServerSink) stageArrays(args [][]byte, formats []int16, rows [][][]byte, live []int) {
	for j := range args {
		if a, ok := appendBinaryArray(args[j][:0], s.stageElems[j], rows, live, j); ok {
			args[j], formats[j] = a, 1
			continue
		}
		a := append(args[j][:0], '{')
		for k, i := range live {
			if k > 0 {
				a = append(a, s.stageDelims[j])
			}
			a = appendArrayElem(a, rows[i][j])
		}
		args[j], formats[j] = append(a, '}'), 0
	}
}

// appendBinaryArray appends column j of the rows live[...] as a
// one-dimensional array of elem in binary format, or says an element has
// no binary form.
func appendBinaryArray(dst []byte, elem uint32, rows [][][]byte, live []int, j int) ([]byte, bool) {
	if !binaryFit([]uint32{elem}) {
		return dst, false
	}
	dst = binary.BigEndian.AppendUint32(dst, 1) // dimensions
	nulls := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, 0) // has nulls: set below
	dst = binary.BigEndian.AppendUint32(dst, elem)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(live)))
	dst = binary.BigEndian.AppendUint32(dst, 1) // lower bound
	for _, i := range live {
		v := rows[i][j]
		if v == nil {
			binary.BigEndian.PutUint32(dst[nulls:], 1)
			dst = binary.BigEndian.AppendUint32(dst, 1<<32-1)
			continue
		}
		var ok bool
		if dst, ok = appendBinaryField(dst, elem, v); !ok {
			return dst, false
		}
	}
	return dst, true
}

// appendArrayElem appends v as an element of a text-format array: NULL,
// or quoted with its quotes and backslashes escaped.
func appendArrayElem(dst, v []byte) []byte {
	if v == nil {
		return append(dst, "NULL"...)
	}
	dst = append(dst, '"')
	for {
		i := bytes.IndexAny(v, `"\`)
		if i < 0 {
			break
		}
		dst = append(append(dst, v[:i]...), '\\', v[i])
		v = v[i+1:]
	}
	return append(append(dst, v...), '"')
}

// stagePG writes the live rows through the staged statement in one
// transaction, chunk by chunk in one pipeline: BEGIN, each chunk sent as
// soon as it is encoded, the outbox position if any, COMMIT, then the
// results. It returns how many rows the statements left unchanged
// (absorbed by the conflict clause), or rowWise when the batch must be
// written row by row instead (a refused row, a key twice under DO UPDATE,
// or staging turned off); the transaction may then be open, aborted: the
// caller rolls it back. An error is the whole batch's (the connection, a
// deadlock): nothing of it may be acked.
func (s *sqlServerSink) stagePG(ctx context.Context, c *pgConn, recs []*runtime.Record, rows [][][]byte, live []int) (absorbed int64, rowWise bool, err error) {
	if err := s.stageReady(ctx, c); err != nil {
		if errors.Is(err, errStageUnfit) {
			s.stageOff.Store(true)
			return 0, true, nil
		}
		return s.stageFailed(err)
	}
	live = s.order.sortText(rows, live) // at concurrency above 1 (lockorder.go)
	absorbed, err = s.stagedPipeline(ctx, c, recs, rows, live, true, true)
	if err != nil {
		return s.stageFailed(err) // the connection's error is retried
	}
	s.staged.Add(int64((len(live) + stageChunk - 1) / stageChunk))
	return absorbed, false, nil
}

// stagedPipeline sends the rows idx through the staged statement chunk by
// chunk in one pipeline, after BEGIN when begin is set, before the outbox
// position (if any) and COMMIT when commit is, and returns how many of
// the rows changed nothing.
func (s *sqlServerSink) stagedPipeline(ctx context.Context, c *pgConn, recs []*runtime.Record, rows [][][]byte, idx []int, begin, commit bool) (int64, error) {
	return s.chunkPipeline(ctx, c, recs, chunksOf(rows, idx), pipeEnds{begin: begin, commit: commit})
}

// chunksOf yields the rows idx a chunk at a time.
func chunksOf(rows [][][]byte, idx []int) iter.Seq2[[][][]byte, []int] {
	return func(yield func([][][]byte, []int) bool) {
		for start := 0; start < len(idx); start += stageChunk {
			if !yield(rows, idx[start:min(start+stageChunk, len(idx))]) {
				return
			}
		}
	}
}

// pipeEnds is what a staged pipeline sends around its chunks.
type pipeEnds struct {
	begin  bool // BEGIN first
	lazy   bool // then asideSettings (pgaside.go)
	commit bool // the outbox position, if any, and COMMIT last
}

// chunkPipeline sends each chunk of rows (rows, and the indexes of the
// chunk's rows in it) through the staged statement as it comes, in one
// pipeline with ends around them, and returns how many of the rows
// changed nothing.
func (s *sqlServerSink) chunkPipeline(ctx context.Context, c *pgConn, recs []*runtime.Record, chunkRows iter.Seq2[[][][]byte, []int], ends pipeEnds) (int64, error) {
	p := c.conn.StartPipeline(ctx)
	steps := 0
	if ends.begin {
		p.SendQueryParams("BEGIN", nil, nil, nil, nil)
		steps++
	}
	if ends.lazy {
		p.SendQueryParams(asideSettings, nil, nil, nil, nil)
		steps++
	}
	firstChunk := steps
	args := make([][]byte, s.stage.params)
	formats := make([]int16, s.stage.params)
	var chunks []int
	for rows, ch := range chunkRows {
		s.stageArrays(args, formats, rows, ch)
		p.SendQueryPrepared(pgStageStmt, args, formats, nil)
		// Flush copies args into the socket: the buffers are free for
		// the next chunk while the server runs this one.
		if err := p.Flush(); err != nil {
			p.Close()
			return 0, err
		}
		chunks = append(chunks, len(ch))
	}
	if ends.commit {
		if s.outboxRoute != "" {
			p.SendQueryParams(outboxUpsertPG, [][]byte{[]byte(s.outboxRoute), strconv.AppendUint(nil, outboxNext(recs), 10)}, nil, nil, nil)
			steps++
		}
		p.SendQueryParams("COMMIT", nil, nil, nil, nil)
		steps++
	}
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		p.Close()
		return 0, err
	}
	// The results in order: BEGIN, the chunks, the position, COMMIT. After
	// an error the server skips the rest up to the Sync.
	var absorbed int64
	var failed error
	for k := 0; k < steps+len(chunks) && failed == nil; k++ {
		tag, err := pipelineResult(p)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			if ch := k - firstChunk; ch >= 0 && ch < len(chunks) {
				absorbed += int64(chunks[ch]) - tag.RowsAffected()
			}
		case !errors.As(err, &pe): // the connection: the pipeline is gone
			p.Close()
			return 0, err
		default:
			failed = err
		}
	}
	if err := pipelineSync(p); err != nil {
		p.Close()
		return 0, err
	}
	if err := p.Close(); err != nil {
		return 0, err
	}
	return absorbed, failed
}

// pipelineResult reads the next statement's result off p.
func pipelineResult(p *pgconn.Pipeline) (pgconn.CommandTag, error) {
	res, err := p.GetResults()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return pgconn.CommandTag{}, fmt.Errorf("pipeline: %T where a statement's result was due", res)
	}
	return rr.Close()
}

// pipelineSync reads the next Sync's answer off p.
func pipelineSync(p *pgconn.Pipeline) error {
	res, err := p.GetResults()
	if err != nil {
		return err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return fmt.Errorf("pipeline: %T where a sync was due", res)
	}
	return nil
}

// stageFailed says what a failed staged write means: an error to retry
// the batch (the connection, a deadlock), or a write row by row; staging
// is turned off when it cannot work for this statement at all.
func (s *sqlServerSink) stageFailed(err error) (absorbed int64, rowWise bool, _ error) {
	switch classifyPG(err) {
	case sqlRetryable:
		return 0, false, err
	case sqlRowLevel:
		return 0, true, nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "21000" { // DO UPDATE touched a row twice
		return 0, true, nil
	}
	s.stageOff.Store(true)
	return 0, true, nil
}
