package sql

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/runtime"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/plan"
)

// Staged inserts: a PostgreSQL sink whose insert_query is one VALUES row
// loads each batch with COPY into a temporary table of the statement's
// parameters, then runs the user's statement once over it:
//
//	INSERT INTO orders (id, amount) VALUES (${payload.id}, ${payload.amount}) ON CONFLICT (id) DO NOTHING
//
// becomes, per batch and in one transaction,
//
//	COPY mqb_stage FROM STDIN   -- mqb_ord, p1, p2: one row per record
//	INSERT INTO orders (id, amount) SELECT mqb_stage.p1, mqb_stage.p2 FROM mqb_stage ORDER BY mqb_ord ON CONFLICT (id) DO NOTHING
//
// The server parses, plans and checks constraints once per batch rather
// than once per row. The rows go in read order, so a conflict clause
// resolves repeats within a batch as the row-by-row inserts would (the
// first one inserted, the next ones doing nothing); what a single
// statement cannot do the same way fails it, and the batch is written
// again by the row-by-row path, which isolates a refused row:
//
//   - a row the server refuses (a constraint, a bad value) fails the whole
//     statement;
//   - ON CONFLICT DO UPDATE cannot touch one row twice in a statement
//     (21000): a batch holding a key twice is written row by row, so an
//     accumulating update adds both.
//
// Only statements of exactly that shape are staged: INSERT INTO t [(cols)]
// VALUES (…) followed by nothing that reads a parameter (DO UPDATE SET may
// name only the target and EXCLUDED), no RETURNING, no second statement,
// no dollar quoting. report_outcome needs each row's count and bulk_copy
// has its own COPY, so neither is staged. A statement the staging form
// makes the server reject for a reason that is no row's (a type the
// temporary table cannot carry) turns staging off for the sink.

// pgStageTable is the session temporary table a staged batch is copied to;
// ON COMMIT DELETE ROWS leaves it empty for the next batch.
const pgStageTable = "mqb_stage"

// pgStaged is a staged insert: the statement over pgStageTable.
type pgStaged struct {
	insert string
	params int
}

// stageMark stands for parameter n while the statement is rewritten: a
// byte no SQL text carries.
func stageMark(n int) string { return "\x00" + strconv.Itoa(n) + "\x00" }

var (
	stageMarkRE   = lazyre.New("\x00([0-9]+)\x00")
	stagePrefixRE = lazyre.New(`(?is)^\s*INSERT\s+INTO\s+[^\s(]+\s*(\([^()]*\))?\s*$`)
	returningRE   = lazyre.New(`(?i)\bRETURNING\b`)
)

// stagedInsert rewrites insert_query's parts into the staged statement,
// or says it cannot.
func stagedInsert(parts []plan.Part) (pgStaged, bool) {
	var q strings.Builder
	n := 0
	for _, p := range parts {
		if p.Expr == "" {
			if strings.ContainsRune(p.Lit, 0) {
				return pgStaged{}, false
			}
			q.WriteString(p.Lit)
			continue
		}
		n++
		q.WriteString(stageMark(n))
	}
	if n == 0 {
		return pgStaged{}, false
	}
	sql := q.String()
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
	row := stageMarkRE().ReplaceAllString(sql[open+1:closing], pgStageTable+".p$1")
	insert := sql[:at] + "SELECT " + row + " FROM pg_temp." + pgStageTable + " ORDER BY mqb_ord" + rest
	return pgStaged{insert: insert, params: n}, true
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

// pgStageDDL creates the stage table on c, its columns typed as the
// server typed insert_query's parameters when it prepared it.
func pgStageDDL(ctx context.Context, c *pgConn) (string, error) {
	var q strings.Builder
	q.WriteString("SELECT format_type(t, NULL) FROM unnest('{")
	for i, oid := range c.stmt.ParamOIDs {
		if i > 0 {
			q.WriteByte(',')
		}
		if oid == 0 || oid == 705 { // unknown: the server did not infer one
			oid = 25 // text
		}
		q.WriteString(strconv.FormatUint(uint64(oid), 10))
	}
	q.WriteString("}'::oid[]) WITH ORDINALITY AS u(t, i) ORDER BY i")
	res, err := c.conn.Exec(ctx, q.String()).ReadAll()
	if err != nil {
		return "", err
	}
	if len(res) != 1 || len(res[0].Rows) != len(c.stmt.ParamOIDs) {
		return "", errors.New("staged insert: parameter types not listed")
	}
	var ddl strings.Builder
	ddl.WriteString("CREATE TEMPORARY TABLE IF NOT EXISTS " + pgStageTable + " (mqb_ord integer")
	for i, row := range res[0].Rows {
		ddl.WriteString(", p" + strconv.Itoa(i+1) + " " + string(row[0]))
	}
	ddl.WriteString(") ON COMMIT DELETE ROWS")
	return ddl.String(), nil
}

// stagePG writes the live rows through the stage table in one transaction
// with the outbox position, if any. On an error the transaction may still
// be open: the caller rolls it back.
//
// affected is how many rows the statement changed.
func (s *sqlServerSink) stagePG(ctx context.Context, c *pgConn, recs []*runtime.Record, rows [][][]byte, live []int) (affected int64, err error) {
	if !c.staged {
		ddl, err := pgStageDDL(ctx, c)
		if err != nil {
			return 0, err
		}
		if _, err := c.conn.Exec(ctx, ddl).ReadAll(); err != nil {
			return 0, err
		}
		c.staged = true
	}
	var buf bytes.Buffer
	copyRows(&buf, rows, live, true)
	if _, err := c.conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
		return 0, err
	}
	if _, err := c.conn.CopyFrom(ctx, &buf, "COPY pg_temp."+pgStageTable+" FROM STDIN"); err != nil {
		return 0, err
	}
	var b pgconn.Batch
	b.ExecParams(s.stage.insert, nil, nil, nil, nil)
	s.queueOutbox(&b, recs)
	b.ExecParams("COMMIT", nil, nil, nil, nil)
	res, err := c.conn.ExecBatch(ctx, &b).ReadAll()
	if err != nil {
		return 0, err
	}
	return res[0].CommandTag.RowsAffected(), nil
}

// stageFallback says what a failed staged batch means: retry it (the
// connection, a deadlock), or write it row by row; off is set when
// staging cannot work for this statement at all.
func stageFallback(err error) (retry, off bool) {
	switch classifyPG(err) {
	case sqlRetryable:
		return true, false
	case sqlRowLevel:
		return false, false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "21000" { // DO UPDATE touched a row twice
		return false, false
	}
	return false, true
}
