package sql

import (
	"context"
	dbsql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
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
		var dflt dbsql.NullString
		if err := rows.Scan(&cid, &col, &typ, &notNull, &dflt, &pkPos); err != nil {
			return err
		}
		types[strings.ToLower(col)] = typ
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// A STRICT table's ANY column keeps a value as it was bound (text
	// stays text); elsewhere ANY is a type name like any other (NUMERIC).
	strict := false
	if err := s.conn.QueryRowContext(ctx, "SELECT strict FROM "+prefix+"pragma_table_list WHERE name = ?", unquoteIdent(name)).Scan(&strict); err != nil && !errors.Is(err, dbsql.ErrNoRows) {
		return err
	}
	var numeric []string
	for _, c := range cols {
		typ, ok := types[foldCaseless(c)]
		if strict && strings.EqualFold(strings.TrimSpace(typ), "ANY") {
			continue
		}
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
	s.fits = map[int]columnFit{}
	for i, c := range params {
		typ := types[foldCaseless(c)]
		aff := sqliteAffinity(typ)
		s.fits[i] = numericColumn{name: fmt.Sprintf("%s (%s, %s affinity)", c, typ, aff), real: aff == "REAL"}
	}
	return nil
}

// columnFit is a column that stores some values otherwise than they are
// bound: misfit says why v would not come back as it went in ("" when it
// would).
type columnFit interface {
	column() string
	misfit(v any) string
}

// numericColumn is a SQLite column of numeric affinity.
type numericColumn struct {
	name string
	real bool // REAL affinity: every number is a float, exact only to 2^53
}

func (c numericColumn) column() string { return c.name }

func (c numericColumn) misfit(v any) string {
	if c.inexact(v) {
		return "SQLite would store it rounded to a float, so two such ids could become one row; declare the column TEXT to keep every digit"
	}
	return ""
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

// MySQL and MariaDB, outside strict mode and under INSERT IGNORE in any
// mode, store a value their column cannot hold as the nearest one it can:
// an integer past the column's range as its largest value, a string past
// its length cut short. Two ids then become one row and the conflict
// clause drops the second record as a repeat. The key columns a proof
// rests on are read from information_schema.COLUMNS when their premise is
// armed, and a record whose key would change on the way in is
// dead-lettered instead.

// mysqlIntColumn is an integer column (TINYINT … BIGINT, UNSIGNED or not).
type mysqlIntColumn struct {
	name     string
	min, max *big.Int
}

func (c mysqlIntColumn) column() string { return c.name }

func (c mysqlIntColumn) misfit(v any) string {
	n := new(big.Int)
	switch x := v.(type) {
	case bool:
		return ""
	case int64:
		n.SetInt64(x)
	case int:
		n.SetInt64(int64(x))
	case uint64:
		n.SetUint64(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
			return "it is not a whole number, and the server would round it"
		}
		big.NewFloat(x).Int(n)
	case json.Number:
		if _, ok := n.SetString(string(x), 10); !ok {
			return "it is not a whole number, and the server would round it"
		}
	case string:
		if _, ok := n.SetString(x, 10); !ok {
			return "it is not written as a whole number, and the server would store another number (0 for text)"
		}
	default:
		return "it is not a number"
	}
	if n.Cmp(c.min) < 0 || n.Cmp(c.max) > 0 {
		return fmt.Sprintf("it is outside the column's range %s…%s, and the server would store the nearest end of it", c.min, c.max)
	}
	return ""
}

// mysqlStringColumn is a CHAR/VARCHAR (max in characters) or a BINARY,
// VARBINARY, TEXT or BLOB column (max in bytes).
type mysqlStringColumn struct {
	name  string
	max   int64
	bytes bool
}

func (c mysqlStringColumn) column() string { return c.name }

func (c mysqlStringColumn) misfit(v any) string {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		s = string(b)
	default:
		s = fmt.Sprint(x)
	}
	n, unit := int64(utf8.RuneCountInString(s)), "characters"
	if c.bytes {
		n, unit = int64(len(s)), "bytes"
	}
	if n > c.max {
		return fmt.Sprintf("it is %d %s long and the column holds %d, so the server would cut it short", n, unit, c.max)
	}
	return ""
}

// mysqlIntBits are the integer types' widths in bits.
var mysqlIntBits = map[string]uint{"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}

// armMySQLKeyFits reads the declared types of the columns keys binds
// (param index → column) and arms a fit check on those that would change
// a value: integers and strings of bounded length.
func (s *sqlServerSink) armMySQLKeyFits(ctx context.Context, target string, keys map[int]string) error {
	schema, table := splitQualified(target)
	var schemaArg any
	if schema != "" {
		schemaArg = unquoteIdent(schema)
	}
	rows, err := s.my.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), COALESCE(CHARACTER_OCTET_LENGTH, 0)
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`, schemaArg, unquoteIdent(table))
	if err != nil {
		return err
	}
	defer rows.Close()
	cols := map[string]columnFit{}
	for rows.Next() {
		var name, dataType, colType string
		var maxChars, maxBytes int64
		if err := rows.Scan(&name, &dataType, &colType, &maxChars, &maxBytes); err != nil {
			return err
		}
		dataType = strings.ToLower(dataType)
		desc := fmt.Sprintf("%s (%s)", name, colType)
		switch {
		case mysqlIntBits[dataType] > 0:
			bits := mysqlIntBits[dataType]
			c := mysqlIntColumn{name: desc, min: new(big.Int), max: new(big.Int)}
			if strings.Contains(strings.ToLower(colType), "unsigned") {
				c.max.Lsh(big.NewInt(1), bits).Sub(c.max, big.NewInt(1))
			} else {
				c.max.Lsh(big.NewInt(1), bits-1).Sub(c.max, big.NewInt(1))
				c.min.Lsh(big.NewInt(1), bits-1).Neg(c.min)
			}
			cols[strings.ToLower(name)] = c
		case dataType == "char" || dataType == "varchar":
			cols[strings.ToLower(name)] = mysqlStringColumn{name: desc, max: maxChars}
		case maxBytes > 0 && (strings.HasSuffix(dataType, "binary") || strings.HasSuffix(dataType, "text") || strings.HasSuffix(dataType, "blob")):
			cols[strings.ToLower(name)] = mysqlStringColumn{name: desc, max: maxBytes, bytes: true}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i, col := range keys {
		if c, ok := cols[foldCaseless(col)]; ok {
			if s.fits == nil {
				s.fits = map[int]columnFit{}
			}
			s.fits[i] = c
		}
	}
	return nil
}
