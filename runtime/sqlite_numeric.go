package runtime

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SQLite stores a number written as text into a column of INTEGER, NUMERIC
// or REAL affinity as a number, and one past int64 (or past what a float
// holds) as a REAL: 12345678901234567890 and 12345678901234567891 become
// the same 1.2345678901234567e19, so two ids turn into one row and a
// conflict clause drops the second record as a repeat. A record binding
// such a number into such a column is dead-lettered with the reason
// instead; a TEXT (or untyped) column keeps every digit.

// sqliteAffinity is the affinity SQLite gives a column declared with typ
// (the rules of https://sqlite.org/datatype3.html, section 3.1, in order).
func sqliteAffinity(typ string) string {
	t := strings.ToUpper(typ)
	switch {
	case strings.Contains(t, "INT"):
		return "INTEGER"
	case strings.Contains(t, "CHAR"), strings.Contains(t, "CLOB"), strings.Contains(t, "TEXT"):
		return "TEXT"
	case strings.Contains(t, "BLOB"), strings.TrimSpace(t) == "":
		return "BLOB"
	case strings.Contains(t, "REAL"), strings.Contains(t, "FLOA"), strings.Contains(t, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

// armNumericColumns finds the parameters insert_query binds into a column
// of numeric affinity (param index → "column (TYPE)"), reading the table's
// declared types. An insert_query of another shape than INSERT INTO t
// (cols) VALUES (…), or a table not there yet, arms nothing.
func (s *sqlSink) armNumericColumns(ctx context.Context) error {
	table, cols, ok := insertNames(s.insertParts)
	if !ok {
		return nil
	}
	schema, name := splitQualified(table)
	prefix := ""
	if schema != "" {
		prefix = sqliteQuote(unquoteIdent(schema)) + "."
	}
	rows, err := s.conn.QueryContext(ctx, "PRAGMA "+prefix+"table_info("+sqliteQuote(unquoteIdent(name))+")")
	if err != nil {
		return err
	}
	defer rows.Close()
	types := map[string]string{} // folded column name → declared type
	for rows.Next() {
		var cid, notNull, pkPos int
		var col, typ string
		var dflt sql.NullString
		if err := rows.Scan(&cid, &col, &typ, &notNull, &dflt, &pkPos); err != nil {
			return err
		}
		types[strings.ToLower(col)] = typ
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var numeric []string
	for _, c := range cols {
		typ, ok := types[foldCaseless(c)]
		if ok && sqliteAffinity(typ) != "TEXT" && sqliteAffinity(typ) != "BLOB" {
			numeric = append(numeric, c)
		}
	}
	if len(numeric) == 0 {
		return nil
	}
	params, err := keyColumnParams(s.insertParts, numeric, foldCaseless)
	if err != nil {
		return nil // not a shape the params can be placed in: nothing armed
	}
	s.numericParams = map[int]numericColumn{}
	for i, c := range params {
		typ := types[foldCaseless(c)]
		aff := sqliteAffinity(typ)
		s.numericParams[i] = numericColumn{name: fmt.Sprintf("%s (%s, %s affinity)", c, typ, aff), real: aff == "REAL"}
	}
	return nil
}

// numericColumn is a column of numeric affinity a parameter is bound into.
type numericColumn struct {
	name string
	real bool // REAL affinity: every number is a float, exact only to 2^53
}

// inexact reports whether the column cannot hold v exactly: an integer
// past int64 (past 2^53 in a REAL column), or a JSON literal kept as text
// because no int64, uint64 or float holds it exactly.
func (c numericColumn) inexact(v any) bool {
	const exactFloat = 1 << 53
	switch x := v.(type) {
	case int64:
		return c.real && (x > exactFloat || x < -exactFloat)
	case int:
		return c.real && (x > exactFloat || x < -exactFloat)
	case uint64:
		return x > math.MaxInt64 || (c.real && x > exactFloat)
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return err != nil || (c.real && (n > exactFloat || n < -exactFloat))
	}
	return false
}
