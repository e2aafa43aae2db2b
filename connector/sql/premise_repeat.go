package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// PremiseRepeatInsertable: a handler's INSERT whose repeat must not fail
// on a unique key (a failed replay dead-letters the record before the
// sink). The check is an allow-list: every unique index or constraint of
// the table, but one on exactly the conflict target (Key), is plain and
// has a column outside the inserted ones (Columns) that gets a new value
// on every insert (auto-increment, identity, a sequence's nextval, the
// rowid) or is NULL when left out (nullable, no default), and NULLs are
// distinct in it. Anything else, an index on an expression, a partial
// one, an exclusion constraint, NULLS NOT DISTINCT, breaks the premise.

// repeatKey is one unique index, unique or primary key constraint, or
// exclusion constraint of a table.
type repeatKey struct {
	name string
	cols []string
	// notPlain says why the check cannot follow the key ("" when it can).
	notPlain string
}

// repeatColumns are a table's columns as the catalogue shows them, by
// the name the database keys them under (dbFold).
type repeatColumns map[string]columnFill

// columnFill is what a column an insert leaves out gets. fresh: a new
// value on every insert or NULL, where why says which ("AUTO_INCREMENT",
// "nullable with no default"); otherwise why says what repeats (a
// DEFAULT, NOT NULL, a generated column).
type columnFill struct {
	fresh bool
	why   string
}

func freshFill(why string) columnFill { return columnFill{fresh: true, why: why} }
func sameFill(why string) columnFill  { return columnFill{why: why} }

func (s *sqlSink) checkRepeatInsertable(ctx context.Context, p plan.Premise) error {
	if p.Target == "" || len(p.Columns) == 0 {
		return fmt.Errorf("the premise names no table or no columns")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var keys []repeatKey
	var cols repeatColumns
	var exists bool
	var err error
	fold, dbFold := identFold(foldCaseless), strings.ToLower
	switch {
	case s.server != nil && s.server.dialect == dialectPostgres:
		keys, cols, exists, err = s.server.repeatKeysPG(ctx, p.Target)
		fold, dbFold = foldPostgres, func(c string) string { return c }
	case s.server != nil:
		keys, cols, exists, err = s.server.repeatKeysMySQL(ctx, p.Target)
	default:
		keys, cols, exists, err = s.repeatKeysSQLite(ctx, p.Target)
	}
	if err != nil {
		return fmt.Errorf("read the unique keys and columns of %s: %v", p.Target, plan.RedactURLs(err.Error()))
	}
	if !exists {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s does not exist", p.Target),
			Fix:   "create it before the route starts (create_table does so before the check)",
		}
	}
	inserted := map[string]bool{}
	for _, c := range p.Columns {
		inserted[fold(c)] = true
	}
	target := map[string]bool{}
	for _, c := range p.Key {
		target[fold(c)] = true
	}
	written := strings.Join(p.Columns, ", ")
	for _, k := range keys {
		if k.notPlain != "" {
			return &runtime.PremiseFailure{
				Found: fmt.Sprintf("table %s has %s %s, which is %s: mqb cannot tell whether a repeat of the handler's insert into (%s) conflicts on it, and a repeat that does is dead-lettered before the sink",
					p.Target, keyWord(k), k.name, k.notPlain, written),
				Fix: fmt.Sprintf("drop %s, or give the handler's insert_query a conflict clause that absorbs a repeat (ON CONFLICT (key) DO NOTHING, or ON DUPLICATE KEY UPDATE on MySQL, over a key bound to stable values)", k.name),
			}
		}
		if len(target) > 0 && len(k.cols) == len(target) && allIn(k.cols, target, dbFold) {
			continue // the conflict target: the clause handles it
		}
		var same []string
		escapes := false
		for _, c := range k.cols {
			switch {
			case inserted[dbFold(c)]:
				same = append(same, c+" (inserted)")
			case cols[dbFold(c)].fresh:
				escapes = true
			default:
				why := cols[dbFold(c)].why
				if why == "" {
					why = "the catalogue does not show it as a column"
				}
				same = append(same, c+" (left out, and "+why+")")
			}
		}
		if escapes {
			continue
		}
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s has the unique key %s (%s), and a repeat of the handler's insert into (%s) writes the same values into it: %s; so a record replayed after a crash fails there and is dead-lettered before the sink",
				p.Target, k.name, strings.Join(k.cols, ", "), written, strings.Join(same, ", ")),
			Fix: fmt.Sprintf("give a column of %s outside (%s) a new value on every insert (auto-increment, identity) or make it nullable with no default, drop %s, or give the handler's insert_query a conflict clause that absorbs a repeat",
				k.name, written, k.name),
		}
	}
	return nil
}

func keyWord(k repeatKey) string {
	if strings.HasPrefix(k.notPlain, "an exclusion constraint") {
		return "the constraint"
	}
	return "the unique key"
}

func allIn(cols []string, set map[string]bool, dbFold func(string) string) bool {
	for _, c := range cols {
		if !set[dbFold(c)] {
			return false
		}
	}
	return true
}

// repeatKeysSQLite reads a table's unique keys from `pragma index_list`
// (partial ones and those on an expression are not plain) and, for the
// INTEGER PRIMARY KEY of a rowid table (the rowid alias, which has no
// index of its own), from `pragma table_xinfo`, with its columns (a
// generated one is hidden from table_info).
func (s *sqlSink) repeatKeysSQLite(ctx context.Context, target string) ([]repeatKey, repeatColumns, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := func(query string, scan func(*dbsql.Rows) error) error { return s.eachRow(ctx, query, scan) }
	cols := repeatColumns{}
	type pkCol struct{ name, typ string }
	var pk []pkCol
	exists := false
	err := q(sqlitePragma("table_xinfo", target, ""), func(rows *dbsql.Rows) error {
		var cid, notNull, pkPos, hidden int
		var name, typ string
		var dflt dbsql.NullString
		if err := rows.Scan(&cid, &name, &typ, &notNull, &dflt, &pkPos, &hidden); err != nil {
			return err
		}
		exists = true
		lc := strings.ToLower(name)
		if pkPos > 0 {
			pk = append(pk, pkCol{name, typ})
		}
		switch {
		case hidden != 0:
			cols[lc] = sameFill("it is generated from the row")
		case pkPos > 0:
			cols[lc] = sameFill("it is in the PRIMARY KEY")
		case notNull != 0:
			cols[lc] = sameFill("it is NOT NULL")
		case dflt.Valid && !strings.EqualFold(strings.TrimSpace(dflt.String), "NULL"):
			cols[lc] = sameFill("its DEFAULT " + dflt.String + " can give it the same value again")
		default:
			cols[lc] = freshFill("nullable with no default")
		}
		return nil
	})
	if err != nil || !exists {
		return nil, nil, exists, err
	}
	var keys []repeatKey
	pkIndexed := false
	type ix struct {
		name    string
		partial bool
	}
	var indexes []ix
	err = q(sqlitePragma("index_list", target, ""), func(rows *dbsql.Rows) error {
		e, err := scanIndexList(rows)
		if err != nil {
			return err
		}
		if e.origin == "pk" {
			pkIndexed = true
		}
		if e.unique {
			indexes = append(indexes, ix{e.name, e.partial})
		}
		return nil
	})
	if err != nil {
		return nil, nil, true, err
	}
	if len(pk) == 1 && !pkIndexed && strings.EqualFold(strings.TrimSpace(pk[0].typ), "INTEGER") {
		// The rowid alias: numbered anew by every insert that leaves it out.
		keys = append(keys, repeatKey{name: "PRIMARY KEY", cols: []string{pk[0].name}})
		cols[strings.ToLower(pk[0].name)] = freshFill("the rowid")
	}
	for _, x := range indexes {
		k := repeatKey{name: x.name}
		if x.partial {
			k.notPlain = "partial (CREATE UNIQUE INDEX … WHERE)"
		}
		err := q(sqlitePragma("index_info", target, x.name), func(rows *dbsql.Rows) error {
			var seqno, cid int
			var name dbsql.NullString
			if err := rows.Scan(&seqno, &cid, &name); err != nil {
				return err
			}
			if !name.Valid && k.notPlain == "" {
				k.notPlain = "on an expression"
			}
			k.cols = append(k.cols, name.String)
			return nil
		})
		if err != nil {
			return nil, nil, true, err
		}
		keys = append(keys, k)
	}
	return keys, cols, true, nil
}

// pgRepeatKeysQuery lists the key columns of every unique index and
// exclusion constraint of a table, valid or not, deferrable or not (each
// refuses a row, at the latest at commit), with what makes one not plain.
// %s is indnullsnotdistinct on PostgreSQL 15 and later, false before.
const pgRepeatKeysQuery = `SELECT i.indexrelid::regclass::text, i.indisexclusion, i.indpred IS NOT NULL, i.indexprs IS NOT NULL, %s, COALESCE(a.attname::text, '')
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum AND k.attnum > 0
WHERE i.indrelid = to_regclass($1) AND (i.indisunique OR i.indisexclusion) AND k.ord <= i.indnkeyatts
ORDER BY 1, k.ord`

// pgRepeatColumnsQuery reads every column: NOT NULL, identity, generated
// (%s: attgenerated on PostgreSQL 12 and later), its DEFAULT, and whether
// its type is a domain (which may bring a DEFAULT or NOT NULL of its own).
const pgRepeatColumnsQuery = `SELECT a.attname::text, a.attnotnull, a.attidentity::text, %s, COALESCE(pg_get_expr(d.adbin, d.adrelid), ''), d.adbin IS NOT NULL, t.typtype = 'd'
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`

// pgNextvalRE matches a DEFAULT that takes the next value of a sequence
// and nothing more (what serial makes).
var pgNextvalRE = lazyre.New(`^nextval\('(?:[^']|'')+'(?:::regclass)?\)$`)

func (s *sqlServerSink) repeatKeysPG(ctx context.Context, target string) ([]repeatKey, repeatColumns, bool, error) {
	c, err := s.pg.get(ctx)
	if err != nil {
		return nil, nil, false, err
	}
	defer s.pg.put(ctx, c)
	res := c.conn.ExecParams(ctx, "SELECT to_regclass($1) IS NOT NULL, current_setting('server_version_num')", [][]byte{[]byte(target)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, nil, false, res.Err
	}
	if len(res.Rows) != 1 || string(res.Rows[0][0]) != "t" {
		return nil, nil, false, nil
	}
	version, _ := strconv.Atoi(string(res.Rows[0][1]))
	nnd, generated := "false", "''"
	if version >= 150000 {
		nnd = "i.indnullsnotdistinct"
	}
	if version >= 120000 {
		generated = "a.attgenerated::text"
	}
	arg := [][]byte{[]byte(target)}
	res = c.conn.ExecParams(ctx, fmt.Sprintf(pgRepeatKeysQuery, nnd), arg, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, nil, true, res.Err
	}
	var keys []repeatKey
	for _, row := range res.Rows {
		name := string(row[0])
		if len(keys) == 0 || keys[len(keys)-1].name != name {
			k := repeatKey{name: name}
			switch {
			case string(row[1]) == "t":
				k.notPlain = "an exclusion constraint (EXCLUDE), refusing rows by operators"
			case string(row[2]) == "t":
				k.notPlain = "partial (a WHERE clause)"
			case string(row[3]) == "t":
				k.notPlain = "on an expression"
			case string(row[4]) == "t":
				k.notPlain = "NULLS NOT DISTINCT, so a NULL repeats as any value does"
			}
			keys = append(keys, k)
		}
		k := &keys[len(keys)-1]
		k.cols = append(k.cols, string(row[5]))
	}
	res = c.conn.ExecParams(ctx, fmt.Sprintf(pgRepeatColumnsQuery, generated), arg, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, nil, true, res.Err
	}
	cols := repeatColumns{}
	for _, row := range res.Rows {
		name, notNull, identity, gen, dflt, hasDefault, domain := string(row[0]), string(row[1]) == "t", string(row[2]), string(row[3]), string(row[4]), string(row[5]) == "t", string(row[6]) == "t"
		switch {
		case identity == "a" || identity == "d":
			cols[name] = freshFill("an identity column")
		case gen != "":
			cols[name] = sameFill("it is generated from the row")
		case hasDefault && pgNextvalRE().MatchString(dflt):
			cols[name] = freshFill("a sequence (DEFAULT " + dflt + ")")
		case hasDefault && !strings.EqualFold(dflt, "NULL") && !strings.HasPrefix(strings.ToUpper(dflt), "NULL::"):
			cols[name] = sameFill("its DEFAULT " + dflt + " can give it the same value again")
		case notNull:
			cols[name] = sameFill("it is NOT NULL")
		case domain:
			cols[name] = sameFill("its type is a domain, which may give it a DEFAULT")
		default:
			cols[name] = freshFill("nullable with no default")
		}
	}
	return keys, cols, true, nil
}

// repeatKeysMySQL reads a table's unique indexes (PRIMARY KEY and UNIQUE,
// NON_UNIQUE = 0; one on an expression is not plain) from
// information_schema.STATISTICS and its columns from
// information_schema.COLUMNS. MariaDB shows a nullable column without a
// default as COLUMN_DEFAULT 'NULL' (unquoted), MySQL as NULL.
func (s *sqlServerSink) repeatKeysMySQL(ctx context.Context, target string) ([]repeatKey, repeatColumns, bool, error) {
	schema, table := splitQualified(target)
	var schemaArg any
	if schema != "" {
		schemaArg = unquoteIdent(schema)
	}
	table = unquoteIdent(table)
	var version string
	if err := s.my.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, nil, false, err
	}
	mariadb := strings.Contains(strings.ToLower(version), "mariadb")
	rows, err := s.my.QueryContext(ctx, `SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`, schemaArg, table)
	if err != nil {
		return nil, nil, false, err
	}
	cols := repeatColumns{}
	exists := false
	for rows.Next() {
		var name, nullable, extra string
		var dflt dbsql.NullString
		if err := rows.Scan(&name, &nullable, &dflt, &extra); err != nil {
			rows.Close()
			return nil, nil, true, err
		}
		exists = true
		lc, ex := strings.ToLower(name), strings.ToLower(extra)
		nullDefault := !dflt.Valid || mariadb && dflt.String == "NULL"
		switch {
		case strings.Contains(ex, "auto_increment"):
			cols[lc] = freshFill("AUTO_INCREMENT")
		case strings.Contains(ex, "generated") || strings.Contains(ex, "virtual") || strings.Contains(ex, "stored") || strings.Contains(ex, "persistent"):
			cols[lc] = sameFill("it is generated or computed by the server (" + extra + ")")
		case !nullDefault:
			cols[lc] = sameFill("its DEFAULT " + dflt.String + " can give it the same value again")
		case !strings.EqualFold(nullable, "YES"):
			cols[lc] = sameFill("it is NOT NULL")
		default:
			cols[lc] = freshFill("nullable with no default")
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || !exists {
		return nil, nil, exists, err
	}
	rows, err = s.my.QueryContext(ctx, `SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND NON_UNIQUE = 0
ORDER BY INDEX_NAME, SEQ_IN_INDEX`, schemaArg, table)
	if err != nil {
		return nil, nil, true, err
	}
	defer rows.Close()
	var keys []repeatKey
	for rows.Next() {
		var name string
		var col dbsql.NullString
		if err := rows.Scan(&name, &col); err != nil {
			return nil, nil, true, err
		}
		if len(keys) == 0 || keys[len(keys)-1].name != name {
			keys = append(keys, repeatKey{name: name})
		}
		k := &keys[len(keys)-1]
		if !col.Valid {
			k.notPlain = "on an expression"
		}
		k.cols = append(k.cols, col.String)
	}
	return keys, cols, true, rows.Err()
}
