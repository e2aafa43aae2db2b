package compiler

import (
	"strings"

	"github.com/mqb-dev/mqb/lang"
)

// sqlTableKeys is what a create_table script says about one table's
// unique keys.
type sqlTableKeys struct {
	name        string
	ifNotExists bool
	// uniques are the column sets of its PRIMARY KEY and UNIQUE
	// constraints and unique indexes on plain columns.
	uniques [][]string
	// autoinc marks columns the database fills by itself with a new
	// value on every insert (AUTOINCREMENT, AUTO_INCREMENT, SERIAL,
	// IDENTITY, a DEFAULT nextval('seq'), SQLite's INTEGER PRIMARY KEY).
	autoinc map[string]bool
	// volatileDefaults are the columns whose DEFAULT is not a literal
	// (CURRENT_TIMESTAMP, random(), nextval(…), …), by lower-case name,
	// with the default as written: a write that leaves them out gets a
	// value the database computes, which may differ on every insert, or
	// may not (two inserts in one second get one CURRENT_TIMESTAMP).
	volatileDefaults map[string]string
	// literalDefaults are the columns whose DEFAULT is a literal other
	// than NULL, by lower-case name, with the default as written: a write
	// that leaves them out gets that same value every time.
	literalDefaults map[string]string
	// nullWhenOmitted marks the columns a write that leaves them out sets
	// to NULL: declared without NOT NULL, outside the PRIMARY KEY, with
	// no DEFAULT (or DEFAULT NULL), not generated, of a type that brings
	// no default of its own (a PostgreSQL domain may; a MySQL TIMESTAMP
	// may be NOT NULL DEFAULT CURRENT_TIMESTAMP without saying so).
	nullWhenOmitted map[string]bool
	// unfilledIntegerKey marks a column declared INTEGER PRIMARY KEY that
	// is not SQLite's rowid (another database, a WITHOUT ROWID table): the
	// database does not number it, and a REPLACE that leaves it out is not
	// proven to give it back.
	unfilledIntegerKey map[string]bool
	// primary are the PRIMARY KEY's columns (never NULL), while the
	// CREATE TABLE is read.
	primary []string
	// unsure: a statement of the script touches the table in a way this
	// reader does not follow (ALTER TABLE, an expression index, a unique
	// key that treats NULLs as equal, an exclusion constraint, …).
	unsure bool
}

// readCreateTable reads a create_table script for the keys of table. found
// is false when no CREATE TABLE of that name is in it.
func readCreateTable(ddl, table string, d sqlDialect) (keys *sqlTableKeys, found bool) {
	// create_table has no placeholders: a marker byte in it is text
	// (lexSQL would take a whole \x01N\x02 for one), so mqb does not
	// read the script.
	if strings.ContainsAny(ddl, "\x01\x02") {
		return nil, false
	}
	toks, err := lexSQL(ddl, d)
	if err != nil {
		return nil, false
	}
	keys = &sqlTableKeys{name: table, autoinc: map[string]bool{}, volatileDefaults: map[string]string{},
		literalDefaults: map[string]string{}, nullWhenOmitted: map[string]bool{}, unfilledIntegerKey: map[string]bool{}}
	var stmt []sqlTok
	for _, t := range toks {
		if t.punct(";") || t.kind == tEOF {
			if len(stmt) > 0 && readDDLStatement(stmt, keys, d) {
				found = true
			}
			stmt = stmt[:0]
			continue
		}
		stmt = append(stmt, t)
	}
	return keys, found
}

// sameTable compares table names, ignoring case and a schema qualifier.
func sameTable(a, b string) bool {
	if i := strings.LastIndexByte(a, '.'); i >= 0 {
		a = a[i+1:]
	}
	if i := strings.LastIndexByte(b, '.'); i >= 0 {
		b = b[i+1:]
	}
	return strings.EqualFold(a, b)
}

// readDDLStatement folds one statement into keys; it reports whether the
// statement is the CREATE TABLE of keys.name.
func readDDLStatement(s []sqlTok, keys *sqlTableKeys, d sqlDialect) bool {
	i := 0
	word := func(w string) bool {
		if i < len(s) && s[i].is(w) {
			i++
			return true
		}
		return false
	}
	name := func() string {
		if i >= len(s) || s[i].kind != tIdent && s[i].kind != tQIdent {
			return ""
		}
		n := s[i].text
		i++
		for i+1 < len(s) && s[i].punct(".") {
			n += "." + s[i+1].text
			i += 2
		}
		return n
	}
	if !word("create") {
		if mentions(s, keys.name) {
			keys.unsure = true
		}
		return false
	}
	word("or")
	word("replace")
	word("temp")
	word("temporary")
	unique := word("unique")
	switch {
	case word("table"):
		if word("if") {
			word("not")
			word("exists")
			keys.ifNotExists = true
		}
		if !sameTable(name(), keys.name) {
			return false
		}
		if i >= len(s) || !s[i].punct("(") {
			keys.unsure = true // CREATE TABLE … AS SELECT
			return true
		}
		if nullsNotDistinct(s[i:]) {
			keys.unsure = true
		}
		// SQLite: in a WITHOUT ROWID table an INTEGER PRIMARY KEY is an
		// ordinary column, not the rowid the database numbers.
		withoutRowid := false
		for j := closingParen(s, i); j+1 < len(s); j++ {
			if s[j].is("without") && s[j+1].is("rowid") {
				withoutRowid = true
			}
		}
		for _, item := range splitItems(s[i+1:]) {
			readTableItem(item, keys, d, withoutRowid)
		}
		for _, c := range keys.primary {
			delete(keys.nullWhenOmitted, strings.ToLower(c))
		}
		return true
	case word("index"):
		word("concurrently")
		if word("if") {
			word("not")
			word("exists")
		}
		if i < len(s) && !s[i].is("on") {
			name()
		}
		if !word("on") || !sameTable(name(), keys.name) {
			return false
		}
		if word("using") {
			name()
		}
		cols, ok := plainColumns(s[i:])
		rest := s[i:]
		for j, t := range rest {
			if t.is("where") && j > 0 {
				ok = false // a partial index holds only for some rows
			}
		}
		switch {
		case !unique:
		case ok && !nullsNotDistinct(rest):
			keys.uniques = append(keys.uniques, cols)
		default:
			keys.unsure = true
		}
	default:
		if mentions(s, keys.name) {
			keys.unsure = true
		}
	}
	return false
}

// nullsNotDistinct: the tokens hold NULLS NOT DISTINCT (PostgreSQL 15),
// which makes a unique key refuse a second row that repeats a NULL.
func nullsNotDistinct(s []sqlTok) bool {
	for j := 0; j+2 < len(s); j++ {
		if s[j].is("nulls") && s[j+1].is("not") && s[j+2].is("distinct") {
			return true
		}
	}
	return false
}

// closingParen is the index of the parenthesis that closes the one at
// s[open], or len(s).
func closingParen(s []sqlTok, open int) int {
	depth := 0
	for j := open; j < len(s); j++ {
		switch {
		case s[j].punct("("):
			depth++
		case s[j].punct(")"):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(s)
}

func mentions(s []sqlTok, table string) bool {
	for _, t := range s {
		if (t.kind == tIdent || t.kind == tQIdent) && sameTable(t.text, table) {
			return true
		}
	}
	return false
}

// splitItems splits the inside of a parenthesis (the tokens after its
// opening one) at top-level commas, up to its closing one.
func splitItems(s []sqlTok) [][]sqlTok {
	var out [][]sqlTok
	depth, start := 0, 0
	for j, t := range s {
		switch {
		case t.punct("("):
			depth++
		case t.punct(")") && depth == 0:
			return append(out, s[start:j])
		case t.punct(")"):
			depth--
		case t.punct(",") && depth == 0:
			out = append(out, s[start:j])
			start = j + 1
		}
	}
	return append(out, s[start:])
}

// plainColumns reads the first parenthesised column list in s: ok is
// false when an entry is more than a column name (with ASC/DESC or a
// collation), such as an expression or a MySQL prefix length.
func plainColumns(s []sqlTok) ([]string, bool) {
	for j, t := range s {
		if !t.punct("(") {
			continue
		}
		var cols []string
		for _, item := range splitItems(s[j+1:]) {
			if len(item) == 0 || item[0].kind != tIdent && item[0].kind != tQIdent {
				return nil, false
			}
			for _, w := range item[1:] {
				if !(w.is("asc") || w.is("desc") || w.is("collate") || w.kind == tQIdent || w.kind == tIdent && len(item) > 2 && item[1].is("collate")) {
					return nil, false
				}
			}
			cols = append(cols, item[0].text)
		}
		return cols, len(cols) > 0
	}
	return nil, false
}

// readTableItem folds one item of a CREATE TABLE's parenthesis (a column
// or a table constraint) into keys. d is the script's dialect;
// withoutRowid says the table is a SQLite WITHOUT ROWID table.
func readTableItem(item []sqlTok, keys *sqlTableKeys, d sqlDialect, withoutRowid bool) {
	if len(item) == 0 {
		return
	}
	k := 0
	if item[0].is("constraint") {
		k = 2
	}
	if k >= len(item) {
		return
	}
	head := item[k]
	switch {
	case head.is("primary") || head.is("unique"):
		cols, ok := plainColumns(item[k:])
		if !ok {
			keys.unsure = true
			return
		}
		keys.uniques = append(keys.uniques, cols)
		if head.is("primary") {
			keys.primary = append(keys.primary, cols...)
		}
		return
	case head.is("exclude"):
		// A PostgreSQL exclusion constraint refuses a row as a unique key
		// does, by operators this reader does not follow.
		keys.unsure = true
		return
	case head.is("key") || head.is("index") || head.is("fulltext") || head.is("spatial") ||
		head.is("check") || head.is("foreign"):
		return
	case head.kind != tIdent && head.kind != tQIdent:
		keys.unsure = true
		return
	}
	col := head.text
	lc := strings.ToLower(col)
	depth := 0
	typ := ""
	builtinType := len(item) == 1 // SQLite: a column without a type
	if len(item) > 1 && item[1].kind == tIdent {
		typ = strings.ToLower(item[1].text)
		builtinType = d != sqlPostgres || pgBuiltinTypes[typ] && !(len(item) > 2 && item[2].punct("."))
	}
	if typ == "serial" || typ == "bigserial" || typ == "smallserial" || typ == "serial2" || typ == "serial4" || typ == "serial8" {
		keys.autoinc[lc] = true
	}
	notNull, generated, hasDefault := false, false, false
	for j := 1; j < len(item); j++ {
		t := item[j]
		switch {
		case t.punct("("):
			depth++
		case t.punct(")"):
			depth--
		case depth > 0:
		case t.is("primary") && j+1 < len(item) && item[j+1].is("key"):
			keys.uniques = append(keys.uniques, []string{col})
			keys.primary = append(keys.primary, col)
			switch {
			case typ != "integer":
			case d == sqlSQLite && !withoutRowid:
				keys.autoinc[lc] = true // SQLite's rowid alias
			default:
				keys.unfilledIntegerKey[lc] = true
			}
		case t.is("unique"):
			keys.uniques = append(keys.uniques, []string{col})
		case t.is("autoincrement") || t.is("auto_increment") || t.is("identity"):
			keys.autoinc[lc] = true
		case t.is("not") && j+1 < len(item) && item[j+1].is("null"):
			notNull = true
		case t.is("generated") || t.is("as") && j+1 < len(item) && item[j+1].punct("("):
			generated = true // computed from the row: the same on a repeat
		case t.is("default") && !item[j-1].is("by"): // not GENERATED BY DEFAULT AS IDENTITY
			hasDefault = true
			shown, lit, null := literalDefault(item[j+1:])
			switch {
			case null:
				hasDefault = false
			case lit:
				keys.literalDefaults[lc] = shown
			case isNextval(item[j+1:]):
				keys.autoinc[lc] = true // a sequence: a new value on every insert
				keys.volatileDefaults[lc] = shown
			default:
				keys.volatileDefaults[lc] = shown
			}
		}
	}
	// A MySQL TIMESTAMP column may be NOT NULL DEFAULT CURRENT_TIMESTAMP
	// without saying so (explicit_defaults_for_timestamp off).
	mysqlTimestamp := d == sqlMySQL && typ == "timestamp"
	if !notNull && !generated && !hasDefault && builtinType && !mysqlTimestamp && !keys.autoinc[lc] {
		keys.nullWhenOmitted[lc] = true
	}
}

// pgBuiltinTypes are PostgreSQL's built-in type names (the first word of
// each), which bring no DEFAULT of their own: a column of a domain takes
// the domain's DEFAULT when it has none.
var pgBuiltinTypes = map[string]bool{
	"text": true, "varchar": true, "char": true, "character": true, "bpchar": true, "name": true,
	"smallint": true, "integer": true, "int": true, "int2": true, "int4": true, "int8": true, "bigint": true,
	"numeric": true, "decimal": true, "real": true, "float4": true, "float8": true, "double": true, "float": true, "money": true,
	"serial": true, "bigserial": true, "smallserial": true, "serial2": true, "serial4": true, "serial8": true,
	"boolean": true, "bool": true, "bytea": true, "uuid": true, "json": true, "jsonb": true, "xml": true,
	"date": true, "time": true, "timetz": true, "timestamp": true, "timestamptz": true, "interval": true,
	"inet": true, "cidr": true, "macaddr": true, "macaddr8": true, "bit": true, "varbit": true, "oid": true,
}

// isNextval: the DEFAULT expression s is nextval('seq') (with an optional
// ::regclass cast) and nothing more, which gives every insert a new value.
func isNextval(s []sqlTok) bool {
	if len(s) < 4 || !s[0].is("nextval") || !s[1].punct("(") || s[2].kind != tString {
		return false
	}
	j := 3
	if j+2 < len(s) && s[j].punct(":") && s[j+1].punct(":") && s[j+2].is("regclass") {
		j += 3
	} else if j+1 < len(s) && s[j].punct("::") && s[j+1].is("regclass") {
		j += 2
	}
	if j >= len(s) || !s[j].punct(")") {
		return false
	}
	j++
	return j == len(s) || s[j].kind == tIdent
}

// literalDefault reads the expression after DEFAULT: lit for a literal
// (a string, a number, with a sign or in parentheses, NULL, TRUE, FALSE)
// followed by nothing or by the next constraint's keyword, null when
// that literal is NULL. Anything else — CURRENT_TIMESTAMP, a function
// call, a cast, an operator — may give another value on each insert.
// shown is the default as written, shortened.
func literalDefault(s []sqlTok) (shown string, lit, null bool) {
	k := 0
	paren := 0
	for k < len(s) && s[k].punct("(") {
		paren++
		k++
	}
	if k < len(s) && (s[k].punct("-") || s[k].punct("+")) {
		k++
	}
	lit = k < len(s) && (s[k].kind == tString || s[k].kind == tNumber || s[k].is("null") || s[k].is("true") || s[k].is("false"))
	null = lit && s[k].is("null")
	end := k + 1
	for range paren {
		if end < len(s) && s[end].punct(")") {
			end++
		} else {
			lit = false
		}
	}
	lit = lit && (end == len(s) || s[end].kind == tIdent)
	var b strings.Builder
	depth := 0
	for i, t := range s {
		if depth == 0 && i > 0 && t.kind == tIdent && !(i > 0 && s[i-1].punct(".")) {
			break // the next constraint (NOT NULL, ON UPDATE, …)
		}
		if i > 0 && !t.punct("(") && !t.punct(")") && !s[i-1].punct("(") && !t.punct(".") && !s[i-1].punct(".") && !t.punct(",") {
			b.WriteByte(' ')
		}
		b.WriteString(t.String())
		switch {
		case t.punct("("):
			depth++
		case t.punct(")"):
			depth--
		}
		if b.Len() > 40 {
			b.WriteString(" …")
			break
		}
	}
	return b.String(), lit, null && lit
}

// fileCreateTables collects every create_table of the route's file (inline
// endpoints, named ones, nested branches) by the url written beside it, in
// file order, so a table declared by one route's sink can be read for
// another's on the same database. A file is walked once per build: walking
// it for every sink made a build quadratic in its routes.
func (rc *routeCtx) fileCreateTables() map[string][]string {
	if rc.file == nil {
		return nil
	}
	if byURL, ok := rc.c.fileDDLs[rc.file]; ok {
		return byURL
	}
	byURL := map[string][]string{}
	if rc.c.fileDDLs == nil {
		rc.c.fileDDLs = map[*lang.File]map[string][]string{}
	}
	rc.c.fileDDLs[rc.file] = byURL
	str := func(it *lang.Item) (string, bool) {
		if it.Assign == nil || it.Assign.Expr == nil {
			return "", false
		}
		tok, ok := it.Assign.Expr.Single()
		if !ok || tok.Type != lang.TString && tok.Type != lang.TRaw {
			return "", false
		}
		return lang.StringValue(tok), true
	}
	var walk func(b *lang.Block)
	walk = func(b *lang.Block) {
		var url, ddl string
		var hasDDL bool
		for it := range b.EachItem() {
			switch it.Key.Name {
			case "url":
				url, _ = str(it)
			case "create_table":
				ddl, hasDDL = str(it)
			}
			if it.Body != nil {
				walk(it.Body)
			}
			if it.Assign != nil && it.Assign.Block != nil {
				walk(it.Assign.Block)
			}
		}
		if hasDDL {
			byURL[url] = append(byURL[url], ddl)
		}
	}
	for _, d := range rc.file.Decls {
		switch {
		case d.Route != nil:
			walk(d.Route.Body)
		case d.Endpoint != nil:
			walk(d.Endpoint.Body)
		}
	}
	return byURL
}

// tableKeys finds what create_table says about table: the sink's own
// create_table first, then any other in the file written for the same url.
// own is false for one found elsewhere.
func (rc *routeCtx) tableKeys(n *nodeInfo, table string, d sqlDialect) (keys *sqlTableKeys, own, found bool) {
	if a := n.attrs["create_table"]; a != nil {
		if keys, found := readCreateTable(a.val.Str, table, d); found {
			return keys, true, true
		}
	}
	url, static, ok := urlText(n.attrs["url"])
	if !ok || !static {
		return nil, false, false
	}
	for _, ddl := range rc.fileCreateTables()[url] {
		if keys, found := readCreateTable(ddl, table, d); found {
			return keys, false, true
		}
	}
	return nil, false, false
}
