package sql

import (
	"context"
	dbsql "database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// The SQL sink's premises: PremiseUniqueKey (the conflict target has a
// UNIQUE or PRIMARY KEY index, read from the database's catalogue),
// PremiseReplaceStableColumns (every column a REPLACE leaves out comes
// back the same on a replay), PremiseUpdateLeavesUniques (a DO UPDATE
// moves no column of a unique index other than its conflict key),
// PremiseTransactionalTable (the outbox's table rolls back with the
// position, checkTransactional), PremiseRepeatInsertable (a handler's
// insert cannot fail on a unique key when replayed, checkRepeatInsertable)
// PremiseNoTriggers (nothing fires on a write to the table,
// checkNoTriggers) and PremiseKeyPresent (a conflict column is never bound to NULL: NULLs
// never conflict, so a replayed row with one would be inserted again).

// uniqueKey is one UNIQUE or PRIMARY KEY index of a table: its name and
// its columns as the database stores them.
type uniqueKey struct {
	name string
	cols []string
	// loose says, for a column the index compares more loosely than
	// byte for byte, how (parallel to cols; nil or "" when exact): a
	// case-insensitive collation, a prefix of the value, citext.
	loose []string
}

// setLoose notes that the key's column i compares as why says.
func (k *uniqueKey) setLoose(i int, why string) {
	if why == "" {
		return
	}
	if k.loose == nil {
		k.loose = make([]string, len(k.cols))
	}
	for len(k.loose) < len(k.cols) {
		k.loose = append(k.loose, "")
	}
	k.loose[i] = why
}

// looseness lists the key's columns that compare more loosely than byte
// for byte, each with how ("" when none does).
func (k uniqueKey) looseness() string {
	var parts []string
	for i, why := range k.loose {
		if why != "" && i < len(k.cols) {
			parts = append(parts, k.cols[i]+" ("+why+")")
		}
	}
	return strings.Join(parts, ", ")
}

func (k uniqueKey) String() string { return k.name + " (" + strings.Join(k.cols, ", ") + ")" }

// identFold says how a database compares identifiers: PostgreSQL folds
// unquoted names to lower case and keeps quoted ones; SQLite and MySQL
// compare column names without regard to case.
type identFold func(name string) string

func foldPostgres(name string) string {
	if len(name) >= 2 && name[0] == '"' && name[len(name)-1] == '"' {
		return strings.ReplaceAll(name[1:len(name)-1], `""`, `"`)
	}
	return strings.ToLower(name)
}

func foldCaseless(name string) string { return strings.ToLower(unquoteIdent(name)) }

// unquoteIdent strips one layer of SQL identifier quotes ("x", `x`, [x]).
var unquoteIdent = runtime.UnquoteIdent

// splitQualified splits schema.table (either part possibly quoted) at the
// dot outside quotes.
func splitQualified(name string) (schema, table string) {
	var quote byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case quote != 0:
			if c == quote || (quote == '[' && c == ']') {
				quote = 0
			}
		case c == '"' || c == '`' || c == '[':
			quote = c
		case c == '.':
			return name[:i], name[i+1:]
		}
	}
	return "", name
}

// uniqueKeyHolds reports whether some key's columns are all among cols
// (compared as fold compares them), and which key.
func uniqueKeyHolds(keys []uniqueKey, cols []string, fold identFold, dbFold func(string) string) (uniqueKey, bool) {
	want := map[string]bool{}
	for _, c := range cols {
		want[fold(c)] = true
	}
	for _, k := range keys {
		if len(k.cols) == 0 {
			continue
		}
		all := true
		for _, c := range k.cols {
			if !want[dbFold(c)] {
				all = false
				break
			}
		}
		if all {
			return k, true
		}
	}
	return uniqueKey{}, false
}

// uniqueKeyFailure describes a table without a fitting unique key.
func uniqueKeyFailure(p plan.Premise, keys []uniqueKey) *runtime.PremiseFailure {
	found := fmt.Sprintf("table %s has no UNIQUE or PRIMARY KEY index on columns among (%s)", p.Target, strings.Join(p.Columns, ", "))
	if len(keys) == 0 {
		found += ", and no unique index at all"
	} else {
		names := make([]string, len(keys))
		for i, k := range keys {
			names[i] = k.String()
		}
		found += "; its unique indexes are " + strings.Join(names, ", ")
	}
	found += " — without one a replayed record is inserted again (an ON CONFLICT / INSERT IGNORE clause has nothing to conflict on)"
	return &runtime.PremiseFailure{Found: found, Fix: createUniqueIndexSQL(p.Target, p.Columns)}
}

var nonIdentRE = lazyre.New(`[^A-Za-z0-9_]+`)

// createUniqueIndexSQL is the statement that makes a unique-key premise
// hold: CREATE UNIQUE INDEX orders_id ON orders (id).
func createUniqueIndexSQL(table string, cols []string) string {
	_, bare := splitQualified(table)
	parts := []string{unquoteIdent(bare)}
	for _, c := range cols {
		parts = append(parts, unquoteIdent(c))
	}
	name := strings.Trim(nonIdentRE().ReplaceAllString(strings.Join(parts, "_"), "_"), "_")
	return fmt.Sprintf("CREATE UNIQUE INDEX %s ON %s (%s)", name, table, strings.Join(cols, ", "))
}

func (s *sqlSink) PremiseNode() string { return s.node }

func (s *sqlSink) CheckPremise(ctx context.Context, p plan.Premise) error {
	switch p.Kind {
	case plan.PremiseUniqueKey:
	case plan.PremiseReplaceStableColumns:
		return s.checkReplaceColumns(ctx, s.asWritten(p))
	case plan.PremiseUpdateLeavesUniques:
		return s.checkUpdateLeavesUniques(ctx, s.asWritten(p))
	case plan.PremiseTransactionalTable:
		return s.checkTransactional(ctx, s.asWritten(p))
	case plan.PremiseRepeatInsertable:
		return s.checkRepeatInsertable(ctx, s.asWritten(p))
	case plan.PremiseNoTriggers:
		return s.checkNoTriggers(ctx, s.asWritten(p))
	default:
		return fmt.Errorf("the sql sink cannot check a %s premise", p.Kind)
	}
	p = s.asWritten(p)
	if p.Target == "" || len(p.Columns) == 0 {
		return fmt.Errorf("the premise names no table or no columns")
	}
	keys, exists, fold, dbFold, err := s.uniqueKeys(ctx, p.Target)
	if err != nil {
		return err
	}
	if !exists {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s does not exist", p.Target),
			Fix:   fmt.Sprintf("create it with a PRIMARY KEY or UNIQUE constraint on (%s) (create_table does so before the check)", strings.Join(p.Columns, ", ")),
		}
	}
	k, ok := uniqueKeyHolds(keys, p.Columns, fold, dbFold)
	if !ok {
		return uniqueKeyFailure(p, keys)
	}
	if loose := k.looseness(); loose != "" && s.absent != nil && s.absent.log != nil {
		// Not a premise failure: a replay still lands on the row its
		// first delivery wrote, as in a run without a crash. But two
		// records whose keys differ only as the index ignores are one
		// row, and the later is taken for a repeat of the earlier.
		fix := "declare those columns without a COLLATE clause (SQLite compares BINARY by default)"
		switch {
		case s.server != nil && s.server.dialect == dialectPostgres:
			fix = "make those columns text (not citext) with a deterministic collation"
		case s.server != nil:
			fix = "give those columns a binary collation (COLLATE utf8mb4_bin) and index their full length"
		}
		s.absent.log.Warn(fmt.Sprintf("sql sink: the unique index %s of table %s compares %s more loosely than byte for byte: records whose keys differ only in what it ignores (letter case, accents, trailing spaces, the characters past a prefix) are one row, and all but the first are absorbed as repeats; to keep them apart, %s", k.name, p.Target, loose, fix),
			"route", s.route, "table", p.Target)
	}
	// NULL never conflicts: a record binding NULL into a column of the key
	// that holds the premise would land again on every replay. When the
	// statement names no conflict target, only this check knows which of
	// the premise's columns that key is made of.
	var keyCols []string
	for _, c := range p.Columns {
		if slices.ContainsFunc(k.cols, func(kc string) bool { return dbFold(kc) == fold(c) }) {
			keyCols = append(keyCols, c)
		}
	}
	return s.armKeyColumns(keyCols)
}

// checkTransactional checks PremiseTransactionalTable by an allow-list:
// on PostgreSQL the table is an ordinary or partitioned table (a foreign
// table's rows are committed by another server, a view's by whatever it
// rewrites to); on MySQL and MariaDB its engine is InnoDB (MyISAM, Aria,
// MEMORY and the rest keep a rolled-back transaction's rows).
func (s *sqlSink) checkTransactional(ctx context.Context, p plan.Premise) error {
	if p.Target == "" {
		return fmt.Errorf("the premise names no table")
	}
	if s.server == nil {
		return nil // SQLite: every table rolls back with the transaction
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var what string
	var exists bool
	if s.server.dialect == dialectPostgres {
		c, err := s.server.pg.get(ctx)
		if err != nil {
			return err
		}
		res := c.conn.ExecParams(ctx, "SELECT relkind::text FROM pg_class WHERE oid = to_regclass($1)", [][]byte{[]byte(p.Target)}, nil, nil, nil).Read()
		s.server.pg.put(ctx, c)
		if res.Err != nil {
			return fmt.Errorf("read the kind of table %s: %v", p.Target, plan.RedactURLs(res.Err.Error()))
		}
		if exists = len(res.Rows) == 1; exists {
			switch kind := string(res.Rows[0][0]); kind {
			case "r", "p":
				return nil
			case "f":
				what = "a foreign table"
			case "v":
				what = "a view"
			default:
				what = "of relkind " + kind
			}
		}
	} else {
		schema, table := splitQualified(p.Target)
		var schemaArg any
		if schema != "" {
			schemaArg = unquoteIdent(schema)
		}
		var engine dbsql.NullString
		err := s.server.my.QueryRowContext(ctx, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`,
			schemaArg, unquoteIdent(table)).Scan(&engine)
		switch {
		case errors.Is(err, dbsql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read the engine of table %s: %v", p.Target, plan.RedactURLs(err.Error()))
		case strings.EqualFold(engine.String, "InnoDB"):
			return nil
		case !engine.Valid:
			exists, what = true, "a view"
		default:
			exists, what = true, "a "+engine.String+" table"
		}
	}
	if !exists {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s does not exist", p.Target),
			Fix:   "create it before the route starts (create_table does so before the check)",
		}
	}
	return &runtime.PremiseFailure{
		Found: fmt.Sprintf("table %s is %s, whose rows do not roll back with the transaction that commits the source position", p.Target, what),
		Fix:   fmt.Sprintf("make it a transactional table (ALTER TABLE %s ENGINE=InnoDB on MySQL and MariaDB)", p.Target),
	}
}

// uniqueKeys reads the unique keys of table target from the database's
// catalogue, with how the premise's names (fold) and the catalogue's
// (dbFold) compare.
func (s *sqlSink) uniqueKeys(ctx context.Context, target string) (keys []uniqueKey, exists bool, fold identFold, dbFold func(string) string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fold, dbFold = foldCaseless, strings.ToLower
	switch {
	case s.server != nil && s.server.dialect == dialectPostgres:
		keys, exists, err = s.server.uniqueKeysPG(ctx, target)
		fold, dbFold = foldPostgres, func(c string) string { return c }
	case s.server != nil:
		keys, exists, err = s.server.uniqueKeysMySQL(ctx, target)
	default:
		keys, exists, err = s.uniqueKeysSQLite(ctx, target)
	}
	if err != nil {
		err = fmt.Errorf("read the unique indexes of %s: %v", target, plan.RedactURLs(err.Error()))
	}
	return keys, exists, fold, dbFold, err
}

// checkUpdateLeavesUniques checks PremiseUpdateLeavesUniques: no unique
// index holds a column the update moves (p.Columns) but one over the
// conflict key's columns (p.Key), or, when the statement names no target,
// the table's only unique index. A missing table is left to the unique-key premise.
func (s *sqlSink) checkUpdateLeavesUniques(ctx context.Context, p plan.Premise) error {
	keys, exists, fold, dbFold, err := s.uniqueKeys(ctx, p.Target)
	if err != nil || !exists {
		return err
	}
	moved := map[string]bool{}
	for _, c := range p.Columns {
		moved[fold(c)] = true
	}
	key := map[string]bool{}
	for _, c := range p.Key {
		key[fold(c)] = true
	}
	for _, k := range keys {
		var hit []string
		held := 0 // the key's columns k holds
		for _, c := range k.cols {
			if moved[dbFold(c)] {
				hit = append(hit, c)
			}
			if key[dbFold(c)] {
				held++
			}
		}
		// An index over the key's columns (and more) never refuses a row
		// the key lets in.
		if len(hit) == 0 || len(key) > 0 && held == len(key) || len(p.Key) == 0 && len(keys) == 1 {
			continue
		}
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s has the unique index %s, and the update sets %s: which later records that index refuses then depends on what the rows hold, so a record refused in one run lands when a replay after a crash reaches it after the row moved away", p.Target, k, strings.Join(hit, ", ")),
			Fix:   fmt.Sprintf("leave %s out of the update's SET list, or drop the index %s", strings.Join(hit, ", "), k.name),
		}
	}
	return nil
}

// uniqueKeysSQLite reads a table's unique keys: every unique index from
// `pragma index_list` that is not partial (PRIMARY KEY and UNIQUE
// constraints make one each) with its columns from `pragma index_info`,
// and the PRIMARY KEY from `pragma table_info`, which is how an INTEGER
// PRIMARY KEY (the rowid alias, with no index of its own) shows. An index
// on an expression counts for nothing.
func (s *sqlSink) uniqueKeysSQLite(ctx context.Context, target string) ([]uniqueKey, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := func(query string, scan func(*dbsql.Rows) error) error { return s.eachRow(ctx, query, scan) }
	var keys []uniqueKey
	var pk []string
	exists := false
	err := q(sqlitePragma("table_info", target, ""), func(rows *dbsql.Rows) error {
		var cid, notNull, pkPos int
		var name, typ string
		var dflt dbsql.NullString
		if err := rows.Scan(&cid, &name, &typ, &notNull, &dflt, &pkPos); err != nil {
			return err
		}
		exists = true
		if pkPos > 0 {
			pk = append(pk, name)
		}
		return nil
	})
	if err != nil || !exists {
		return nil, exists, err
	}
	if len(pk) > 0 {
		keys = append(keys, uniqueKey{name: "PRIMARY KEY", cols: pk})
	}
	var indexes []sqliteIndex
	err = q(sqlitePragma("index_list", target, ""), func(rows *dbsql.Rows) error {
		e, err := scanIndexList(rows)
		if err != nil {
			return err
		}
		if e.unique && !e.partial {
			indexes = append(indexes, e)
		}
		return nil
	})
	if err != nil {
		return nil, true, err
	}
	for _, ix := range indexes {
		k := uniqueKey{name: ix.name}
		expr := false
		// index_xinfo: the key's columns (key = 1, then the rowid) with
		// the collation each compares by.
		err := q(sqlitePragma("index_xinfo", target, ix.name), func(rows *dbsql.Rows) error {
			var seqno, cid, desc, key int
			var name, coll dbsql.NullString
			if err := rows.Scan(&seqno, &cid, &name, &desc, &coll, &key); err != nil {
				return err
			}
			if key == 0 {
				return nil
			}
			if !name.Valid {
				expr = true
			}
			k.cols = append(k.cols, name.String)
			if coll.Valid && !strings.EqualFold(coll.String, "BINARY") {
				k.setLoose(len(k.cols)-1, "collation "+coll.String)
			}
			return nil
		})
		if err != nil {
			return nil, true, err
		}
		if expr {
			continue
		}
		if ix.origin == "pk" && len(pk) > 0 {
			// The PRIMARY KEY's own index: how it compares each column
			// is how the PRIMARY KEY does (its columns may be listed in
			// another order).
			for i, c := range k.cols {
				if i < len(k.loose) {
					if j := slices.Index(keys[0].cols, c); j >= 0 {
						keys[0].setLoose(j, k.loose[i])
					}
				}
			}
		}
		keys = append(keys, k)
	}
	return keys, true, nil
}

// sqliteQuote quotes an identifier the SQL standard's way ("a""b"), which
// SQLite and PostgreSQL both read.
func sqliteQuote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// sqlitePragma is pragma applied to an object of target's schema, as
// SQLite takes it: to target's table when object is "" (PRAGMA
// "s".table_info("t"), or PRAGMA table_info("t") unqualified), else to
// the object of that name, such as an index.
func sqlitePragma(pragma, target, object string) string {
	schema, table := splitQualified(target)
	prefix := ""
	if schema != "" {
		prefix = sqliteQuote(unquoteIdent(schema)) + "."
	}
	if object == "" {
		object = unquoteIdent(table)
	}
	return "PRAGMA " + prefix + pragma + "(" + sqliteQuote(object) + ")"
}

// sqliteIndex is a row of SQLite's `pragma index_list`.
type sqliteIndex struct {
	name, origin    string // origin: "c" (CREATE INDEX), "u" (UNIQUE), "pk"
	unique, partial bool
}

// scanIndexList reads the current row of `pragma index_list`, by column
// name: the columns differ between SQLite versions.
func scanIndexList(rows *dbsql.Rows) (sqliteIndex, error) {
	var e sqliteIndex
	names, err := rows.Columns()
	if err != nil {
		return e, err
	}
	vals := make([]any, len(names))
	var unique, partial int
	for i, c := range names {
		switch c {
		case "name":
			vals[i] = &e.name
		case "unique":
			vals[i] = &unique
		case "origin":
			vals[i] = &e.origin
		case "partial":
			vals[i] = &partial
		default:
			vals[i] = new(any)
		}
	}
	if err := rows.Scan(vals...); err != nil {
		return e, err
	}
	e.unique, e.partial = unique == 1, partial != 0
	return e, nil
}

// eachRow runs query on the sink's connection and hands every row to
// scan; the caller holds s.mu.
func (s *sqlSink) eachRow(ctx context.Context, query string, scan func(*dbsql.Rows) error) error {
	rows, err := s.conn.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// pgUniqueKeysQuery lists the key columns of every unique index of a
// table that ON CONFLICT can use: valid, immediate (a deferrable
// constraint is no arbiter), not partial, not on an expression. Columns of
// an INCLUDE clause are past indnkeyatts and not part of the key.
// to_regclass resolves the name as SQL does: unquoted parts fold to lower
// case, the search_path finds an unqualified table.
const pgUniqueKeysQuery = `SELECT i.indexrelid::regclass::text, a.attname,
  format_type(a.atttypid, NULL) = 'citext' OR coalesce((SELECT to_jsonb(c) ->> 'collisdeterministic' = 'false'
    FROM pg_collation c WHERE c.oid = i.indcollation[k.ord - 1]), false)
FROM pg_index i
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indimmediate AND i.indisvalid
  AND i.indpred IS NULL AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts
ORDER BY 1, k.ord`

func (s *sqlServerSink) uniqueKeysPG(ctx context.Context, target string) ([]uniqueKey, bool, error) {
	c, err := s.pg.get(ctx)
	if err != nil {
		return nil, false, err
	}
	defer s.pg.put(ctx, c)
	res := c.conn.ExecParams(ctx, "SELECT to_regclass($1) IS NOT NULL", [][]byte{[]byte(target)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, false, res.Err
	}
	if len(res.Rows) != 1 || string(res.Rows[0][0]) != "t" {
		return nil, false, nil
	}
	res = c.conn.ExecParams(ctx, pgUniqueKeysQuery, [][]byte{[]byte(target)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, true, res.Err
	}
	var keys []uniqueKey
	for _, row := range res.Rows {
		name, col := string(row[0]), string(row[1])
		if len(keys) == 0 || keys[len(keys)-1].name != name {
			keys = append(keys, uniqueKey{name: name})
		}
		k := &keys[len(keys)-1]
		k.cols = append(k.cols, col)
		if string(row[2]) == "t" {
			k.setLoose(len(k.cols)-1, "citext or a nondeterministic collation")
		}
	}
	return keys, true, nil
}

// uniqueKeysMySQL reads the unique indexes (PRIMARY KEY and UNIQUE,
// NON_UNIQUE = 0) of a table from information_schema.statistics; an
// unqualified name is in the connection's database.
func (s *sqlServerSink) uniqueKeysMySQL(ctx context.Context, target string) ([]uniqueKey, bool, error) {
	schema, table := splitQualified(target)
	var schemaArg any
	if schema != "" {
		schemaArg = unquoteIdent(schema)
	}
	table = unquoteIdent(table)
	var n int
	if err := s.my.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`,
		schemaArg, table).Scan(&n); err != nil {
		return nil, false, err
	}
	if n == 0 {
		return nil, false, nil
	}
	// With each column, the prefix the index keeps of it (SUB_PART) and
	// the collation it compares by.
	rows, err := s.my.QueryContext(ctx, `SELECT s.INDEX_NAME, s.COLUMN_NAME, s.SUB_PART, c.COLLATION_NAME
FROM information_schema.STATISTICS s
LEFT JOIN information_schema.COLUMNS c
  ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME
WHERE s.TABLE_SCHEMA = COALESCE(?, DATABASE()) AND s.TABLE_NAME = ? AND s.NON_UNIQUE = 0
ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX`, schemaArg, table)
	if err != nil {
		return nil, true, err
	}
	defer rows.Close()
	var keys []uniqueKey
	skip := map[string]bool{}
	for rows.Next() {
		var name string
		var col, coll dbsql.NullString
		var sub dbsql.NullInt64
		if err := rows.Scan(&name, &col, &sub, &coll); err != nil {
			return nil, true, err
		}
		if !col.Valid { // an index on an expression
			skip[name] = true
		}
		if len(keys) == 0 || keys[len(keys)-1].name != name {
			keys = append(keys, uniqueKey{name: name})
		}
		k := &keys[len(keys)-1]
		k.cols = append(k.cols, col.String)
		switch c := strings.ToLower(coll.String); {
		case sub.Valid:
			k.setLoose(len(k.cols)-1, fmt.Sprintf("only its first %d characters", sub.Int64))
		case coll.Valid && c != "binary" && !strings.HasSuffix(c, "_bin"):
			k.setLoose(len(k.cols)-1, "collation "+coll.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, true, err
	}
	out := keys[:0]
	for _, k := range keys {
		if !skip[k.name] {
			out = append(out, k)
		}
	}
	return out, true, nil
}

// replaceColumn is one column of a table as the catalogue describes it,
// for PremiseReplaceStableColumns.
type replaceColumn struct {
	name string
	// volatile says why the database gives the column a new value when a
	// REPLACE leaves it out ("" when it comes back the same): a DEFAULT
	// that is not a literal, an auto-increment key, the rowid.
	volatile string
}

// checkReplaceColumns checks PremiseReplaceStableColumns: REPLACE deletes
// the row and inserts it anew, so every column it does not write (the
// premise's Columns are those it does) must come back the same on a
// replay. PostgreSQL has no REPLACE: the premise says nothing there.
func (s *sqlSink) checkReplaceColumns(ctx context.Context, p plan.Premise) error {
	if p.Target == "" || len(p.Columns) == 0 {
		return fmt.Errorf("the premise names no table or no columns")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cols []replaceColumn
	var exists bool
	var err error
	switch {
	case s.server != nil && s.server.dialect == dialectPostgres:
		return nil
	case s.server != nil:
		cols, exists, err = s.server.replaceColumnsMySQL(ctx, p.Target)
	default:
		cols, exists, err = s.replaceColumnsSQLite(ctx, p.Target)
	}
	if err != nil {
		return fmt.Errorf("read the columns of %s: %v", p.Target, plan.RedactURLs(err.Error()))
	}
	if !exists {
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s does not exist", p.Target),
			Fix:   "create it (create_table does so before the check) with no column the REPLACE leaves out that has a DEFAULT other than a literal or is auto-increment",
		}
	}
	written := map[string]bool{}
	for _, c := range p.Columns {
		written[foldCaseless(c)] = true
	}
	for _, c := range cols {
		if c.volatile == "" || written[strings.ToLower(c.name)] {
			continue
		}
		return &runtime.PremiseFailure{
			Found: fmt.Sprintf("table %s has column %s, which the REPLACE leaves out (it writes %s), and %s, so every replay deletes the row and inserts it with a new %s",
				p.Target, c.name, strings.Join(p.Columns, ", "), c.volatile, c.name),
			Fix: fmt.Sprintf("write %s in insert_query from a stable value (a payload field), or use INSERT … ON CONFLICT DO NOTHING (INSERT IGNORE on MySQL) instead of REPLACE", c.name),
		}
	}
	return nil
}

// replaceColumnsSQLite reads a table's columns from `pragma table_info`:
// a dflt_value that is not a literal is volatile, and so is the INTEGER
// PRIMARY KEY, the rowid alias (AUTOINCREMENT is only allowed on it),
// which a REPLACE that leaves it out numbers anew.
func (s *sqlSink) replaceColumnsSQLite(ctx context.Context, target string) ([]replaceColumn, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.conn.QueryContext(ctx, sqlitePragma("table_info", target, ""))
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var cols []replaceColumn
	type pkCol struct {
		at  int
		typ string
	}
	var pk []pkCol
	for rows.Next() {
		var cid, notNull, pkPos int
		var name, typ string
		var dflt dbsql.NullString
		if err := rows.Scan(&cid, &name, &typ, &notNull, &dflt, &pkPos); err != nil {
			return nil, true, err
		}
		c := replaceColumn{name: name}
		if dflt.Valid && !sqlLiteralDefault(dflt.String) {
			c.volatile = "its DEFAULT " + dflt.String + " is not a literal"
		}
		if pkPos > 0 {
			pk = append(pk, pkCol{len(cols), typ})
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, len(cols) > 0, err
	}
	if len(pk) == 1 && strings.EqualFold(strings.TrimSpace(pk[0].typ), "INTEGER") && cols[pk[0].at].volatile == "" {
		cols[pk[0].at].volatile = "it is the INTEGER PRIMARY KEY, the rowid, which the database numbers anew (AUTOINCREMENT or not)"
	}
	return cols, len(cols) > 0, nil
}

// replaceColumnsMySQL reads a table's columns from
// information_schema.columns: an auto_increment column, a DEFAULT the
// server computes (EXTRA says DEFAULT_GENERATED, or an ON UPDATE clause
// is set) and a COLUMN_DEFAULT that is not a literal are volatile. A
// generated column (VIRTUAL, STORED, PERSISTENT) is computed from the
// row's other columns by a deterministic expression and comes back the
// same. MariaDB shows a literal default quoted ('new') and a function
// call as written (current_timestamp()); MySQL shows a literal's value
// unquoted and marks every expression DEFAULT_GENERATED, except
// CURRENT_TIMESTAMP before 8.0.13, which is matched by name.
func (s *sqlServerSink) replaceColumnsMySQL(ctx context.Context, target string) ([]replaceColumn, bool, error) {
	schema, table := splitQualified(target)
	var schemaArg any
	if schema != "" {
		schemaArg = unquoteIdent(schema)
	}
	var version string
	if err := s.my.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, false, err
	}
	mariadb := strings.Contains(strings.ToLower(version), "mariadb")
	rows, err := s.my.QueryContext(ctx, `SELECT COLUMN_NAME, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, schemaArg, unquoteIdent(table))
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var cols []replaceColumn
	for rows.Next() {
		var name, extra string
		var dflt dbsql.NullString
		if err := rows.Scan(&name, &dflt, &extra); err != nil {
			return nil, true, err
		}
		c := replaceColumn{name: name}
		ex := strings.ToLower(extra)
		switch {
		case strings.Contains(ex, "auto_increment"):
			c.volatile = "it is AUTO_INCREMENT"
		case strings.Contains(ex, "generated") && !strings.Contains(ex, "default_generated"),
			strings.Contains(ex, "virtual"), strings.Contains(ex, "stored"), strings.Contains(ex, "persistent"):
			// a generated column: computed from the row itself
		case strings.Contains(ex, "default_generated"):
			c.volatile = "its DEFAULT " + dflt.String + " is an expression the server evaluates on every insert"
		case strings.Contains(ex, "on update"):
			c.volatile = "it is set ON UPDATE by the server (" + extra + ")"
		case dflt.Valid && mariadb && !sqlLiteralDefault(dflt.String):
			c.volatile = "its DEFAULT " + dflt.String + " is not a literal"
		case dflt.Valid && !mariadb && mysqlTimeDefaultRE().MatchString(dflt.String):
			c.volatile = "its DEFAULT " + dflt.String + " is not a literal"
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, len(cols) > 0, err
	}
	return cols, len(cols) > 0, nil
}

var mysqlTimeDefaultRE = lazyre.New(`(?i)^\s*(current_timestamp|now|localtime|localtimestamp|current_date|current_time|curdate|curtime|sysdate|utc_timestamp|utc_date|utc_time)\s*(\(\s*\d*\s*\))?\s*$`)

// sqlLiteralDefault reports whether a column DEFAULT as the catalogue
// shows it is a literal: NULL, TRUE or FALSE, a number, a string or blob
// literal, possibly in parentheses. CURRENT_TIMESTAMP and anything else
// (a function call, an expression) is not.
func sqlLiteralDefault(d string) bool {
	d = strings.TrimSpace(d)
	for len(d) >= 2 && d[0] == '(' && d[len(d)-1] == ')' {
		d = strings.TrimSpace(d[1 : len(d)-1])
	}
	switch strings.ToUpper(d) {
	case "NULL", "TRUE", "FALSE":
		return true
	}
	return sqlNumberRE().MatchString(d) || sqlStringRE().MatchString(d)
}

var (
	sqlNumberRE = lazyre.New(`^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^0[xX][0-9a-fA-F]+$`)
	sqlStringRE = lazyre.New(`^[xXbBnN]?'([^'\\]|''|\\.)*'$`)
)

// keyColumnParams maps the placeholders of an INSERT … (cols) VALUES (…),
// … statement to the key columns they are bound into: param index → column.
// parts is insert_query as a template; a placeholder anywhere in a key
// column's VALUES item counts (COALESCE(${a}, ${b}) needs both). A key
// column that is not in the column list, or a statement of another shape,
// is an error: the premise cannot be checked.
func keyColumnParams(parts []plan.Part, keyCols []string, fold identFold) (map[int]string, error) {
	const mark = '\x00'
	var b strings.Builder
	var marks []int // byte offset of each placeholder, in param order
	for _, p := range parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
			continue
		}
		marks = append(marks, b.Len())
		b.WriteByte(mark)
	}
	sc := sqlScanner{src: b.String()}
	if !sc.skipToKeyword("INTO") {
		return nil, fmt.Errorf("insert_query has no INSERT … INTO")
	}
	sc.skipSpace()
	sc.skipName()
	sc.skipSpace()
	if sc.keyword("AS") { // INSERT INTO stock AS t (…): PostgreSQL's and SQLite's table alias
		sc.skipSpace()
		sc.skipName()
		sc.skipSpace()
	}
	colItems, ok := sc.group()
	if !ok {
		return nil, fmt.Errorf("insert_query has no column list after the table name")
	}
	cols := make([]string, len(colItems))
	for i, it := range colItems {
		cols[i] = fold(strings.TrimSpace(sc.src[it[0]:it[1]]))
	}
	sc.skipSpace()
	if !sc.keyword("VALUES") {
		return nil, fmt.Errorf("insert_query is not INSERT … (columns) VALUES (…)")
	}
	want := map[string]string{} // folded → as written in the premise
	for _, c := range keyCols {
		want[fold(c)] = c
	}
	for f, c := range want {
		found := false
		for _, col := range cols {
			if col == f {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("key column %s is not in insert_query's column list", c)
		}
	}
	out := map[int]string{}
	for {
		sc.skipSpace()
		items, ok := sc.group()
		if !ok {
			return nil, fmt.Errorf("insert_query has a VALUES row that is not a parenthesised list")
		}
		if len(items) != len(cols) {
			return nil, fmt.Errorf("insert_query has a VALUES row of %d values for %d columns", len(items), len(cols))
		}
		for j, it := range items {
			c, isKey := want[cols[j]]
			if !isKey {
				continue
			}
			for k, off := range marks {
				if off >= it[0] && off < it[1] {
					out[k] = c
				}
			}
		}
		sc.skipSpace()
		if !sc.eat(',') {
			return out, nil
		}
	}
}

// sqlScanner walks SQL text, stepping over string literals, quoted
// identifiers and comments.
type sqlScanner struct {
	src string
	pos int
}

// skipQuoted steps over a quoted literal, identifier or comment at pos;
// false when none starts there.
func (s *sqlScanner) skipQuoted() bool {
	if s.pos >= len(s.src) {
		return false
	}
	switch c := s.src[s.pos]; {
	case c == '\'' || c == '"' || c == '`':
		for i := s.pos + 1; i < len(s.src); i++ {
			if s.src[i] == c {
				if i+1 < len(s.src) && s.src[i+1] == c {
					i++
					continue
				}
				s.pos = i + 1
				return true
			}
			if s.src[i] == '\\' && c == '\'' {
				i++ // MySQL escapes; harmless elsewhere for our purpose
			}
		}
		s.pos = len(s.src)
		return true
	case c == '[':
		if i := strings.IndexByte(s.src[s.pos:], ']'); i >= 0 {
			s.pos += i + 1
		} else {
			s.pos = len(s.src)
		}
		return true
	case strings.HasPrefix(s.src[s.pos:], "--"):
		if i := strings.IndexByte(s.src[s.pos:], '\n'); i >= 0 {
			s.pos += i + 1
		} else {
			s.pos = len(s.src)
		}
		return true
	case strings.HasPrefix(s.src[s.pos:], "/*"):
		if i := strings.Index(s.src[s.pos+2:], "*/"); i >= 0 {
			s.pos += i + 4
		} else {
			s.pos = len(s.src)
		}
		return true
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// keyword consumes kw (case-insensitive, a whole word) at pos.
func (s *sqlScanner) keyword(kw string) bool {
	end := s.pos + len(kw)
	if end > len(s.src) || !strings.EqualFold(s.src[s.pos:end], kw) {
		return false
	}
	if (s.pos > 0 && isWordByte(s.src[s.pos-1])) || (end < len(s.src) && isWordByte(s.src[end])) {
		return false
	}
	s.pos = end
	return true
}

// skipToKeyword moves past the first kw outside quotes.
func (s *sqlScanner) skipToKeyword(kw string) bool {
	for s.pos < len(s.src) {
		if s.skipQuoted() {
			continue
		}
		if s.keyword(kw) {
			return true
		}
		s.pos++
	}
	return false
}

func (s *sqlScanner) skipSpace() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
			continue
		}
		if strings.HasPrefix(s.src[s.pos:], "--") || strings.HasPrefix(s.src[s.pos:], "/*") {
			s.skipQuoted()
			continue
		}
		return
	}
}

// skipName steps over a possibly qualified, possibly quoted name.
func (s *sqlScanner) skipName() {
	for s.pos < len(s.src) {
		if c := s.src[s.pos]; c == '"' || c == '`' || c == '[' {
			s.skipQuoted()
		} else if isWordByte(c) {
			for s.pos < len(s.src) && isWordByte(s.src[s.pos]) {
				s.pos++
			}
		} else {
			return
		}
		if s.pos < len(s.src) && s.src[s.pos] == '.' {
			s.pos++
			continue
		}
		return
	}
}

func (s *sqlScanner) eat(c byte) bool {
	if s.pos < len(s.src) && s.src[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// group reads a parenthesised, comma-separated list at pos and returns
// the byte range of each item.
func (s *sqlScanner) group() ([][2]int, bool) {
	if !s.eat('(') {
		return nil, false
	}
	var items [][2]int
	start, depth := s.pos, 0
	for s.pos < len(s.src) {
		if s.skipQuoted() {
			continue
		}
		switch s.src[s.pos] {
		case '(':
			depth++
		case ')':
			if depth == 0 {
				items = append(items, [2]int{start, s.pos})
				s.pos++
				return items, true
			}
			depth--
		case ',':
			if depth == 0 {
				items = append(items, [2]int{start, s.pos})
				start = s.pos + 1
			}
		}
		s.pos++
	}
	return nil, false
}

// ArmPremise arms PremiseKeyPresent: every parameter bound into one of the
// premise's columns must not be NULL.
func (s *sqlSink) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseKeyPresent {
		return fmt.Errorf("the sql sink cannot check a per-record %s premise", p.Kind)
	}
	return s.armKeyColumns(s.asWritten(p).Columns)
}

// armKeyColumns makes a record that binds NULL into one of cols (named as
// insert_query writes them) go to the DLQ, adding to the columns armed
// before.
func (s *sqlSink) armKeyColumns(cols []string) error {
	fold := identFold(foldCaseless)
	if s.server != nil && s.server.dialect == dialectPostgres {
		fold = foldPostgres
	}
	keys, err := keyColumnParams(s.insertParts, cols, fold)
	if err != nil {
		return err
	}
	armed := &s.keyParams
	if s.server != nil {
		armed = &s.server.keyParams
	}
	if *armed == nil {
		*armed = map[int]string{}
	}
	maps.Copy(*armed, keys)
	if s.server != nil && s.server.dialect == dialectMySQL {
		table, _, ok := insertNames(s.insertParts)
		if !ok {
			return fmt.Errorf("insert_query names no table the key columns %s can be read from", strings.Join(cols, ", "))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.server.armMySQLKeyFits(ctx, table, keys); err != nil {
			return fmt.Errorf("read the types of key columns %s of %s: %s", strings.Join(cols, ", "), table, plan.RedactURLs(err.Error()))
		}
	}
	return nil
}

// literalText is a query template's literal text, each placeholder a NUL
// byte: what the scanners read a statement's names from.
func literalText(parts []plan.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
		} else {
			b.WriteByte(0)
		}
	}
	return b.String()
}

// insertNames reads the table and the column list of insert_query as
// written, quotes included.
func insertNames(parts []plan.Part) (table string, cols []string, ok bool) {
	sc := sqlScanner{src: literalText(parts)}
	if !sc.skipToKeyword("INTO") {
		return "", nil, false
	}
	sc.skipSpace()
	start := sc.pos
	sc.skipName()
	table = strings.TrimSpace(sc.src[start:sc.pos])
	sc.skipSpace()
	if sc.keyword("AS") { // INSERT INTO stock AS t (…)
		sc.skipSpace()
		sc.skipName()
		sc.skipSpace()
	}
	items, ok := sc.group()
	if !ok || table == "" {
		return "", nil, false
	}
	for _, it := range items {
		cols = append(cols, strings.TrimSpace(sc.src[it[0]:it[1]]))
	}
	return table, cols, true
}

// unquoteQualified unquotes each part of a possibly qualified name.
func unquoteQualified(name string) string {
	schema, table := splitQualified(name)
	if schema == "" {
		return unquoteIdent(table)
	}
	return unquoteIdent(schema) + "." + unquoteIdent(table)
}

// asWritten gives the premise's table and columns the quotes insert_query
// wrote them with. The compiler names them without quotes, and whether a
// PostgreSQL name was quoted decides whether it folds to lower case.
func (s *sqlSink) asWritten(p plan.Premise) plan.Premise {
	table, cols, ok := insertNames(s.insertParts)
	if !ok {
		return p
	}
	if unquoteQualified(table) == unquoteQualified(p.Target) {
		p.Target = table
	}
	out := make([]string, len(p.Columns))
	for i, c := range p.Columns {
		out[i] = c
		for _, raw := range cols {
			if unquoteIdent(raw) == unquoteIdent(c) {
				out[i] = raw
				break
			}
		}
	}
	p.Columns = out
	for i, c := range p.Key {
		for _, raw := range cols {
			if unquoteIdent(raw) == unquoteIdent(c) {
				p.Key = slices.Clone(p.Key)
				p.Key[i] = raw
				break
			}
		}
	}
	return p
}
