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
	// autoinc marks columns the database fills by itself (AUTOINCREMENT,
	// AUTO_INCREMENT, SERIAL, IDENTITY, SQLite's INTEGER PRIMARY KEY).
	autoinc map[string]bool
	// volatileDefaults are the columns whose DEFAULT is not a literal
	// (CURRENT_TIMESTAMP, random(), nextval(…), …), by lower-case name,
	// with the default as written: a write that leaves them out gets a new
	// value on every insert.
	volatileDefaults map[string]string
	// unsure: a statement of the script touches the table in a way this
	// reader does not follow (ALTER TABLE, an expression index, …).
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
	keys = &sqlTableKeys{name: table, autoinc: map[string]bool{}, volatileDefaults: map[string]string{}}
	var stmt []sqlTok
	for _, t := range toks {
		if t.punct(";") || t.kind == tEOF {
			if len(stmt) > 0 && readDDLStatement(stmt, keys) {
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
func readDDLStatement(s []sqlTok, keys *sqlTableKeys) bool {
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
		for _, item := range splitItems(s[i+1:]) {
			readTableItem(item, keys)
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
		case ok:
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

func readTableItem(item []sqlTok, keys *sqlTableKeys) {
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
		return
	case head.is("key") || head.is("index") || head.is("fulltext") || head.is("spatial") ||
		head.is("check") || head.is("foreign") || head.is("exclude"):
		return
	case head.kind != tIdent && head.kind != tQIdent:
		keys.unsure = true
		return
	}
	col := head.text
	depth := 0
	typ := ""
	if len(item) > 1 && item[1].kind == tIdent {
		typ = strings.ToLower(item[1].text)
	}
	if typ == "serial" || typ == "bigserial" || typ == "smallserial" {
		keys.autoinc[strings.ToLower(col)] = true
	}
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
			if typ == "integer" {
				keys.autoinc[strings.ToLower(col)] = true // SQLite's rowid alias
			}
		case t.is("unique"):
			keys.uniques = append(keys.uniques, []string{col})
		case t.is("autoincrement") || t.is("auto_increment") || t.is("identity"):
			keys.autoinc[strings.ToLower(col)] = true
		case t.is("default"):
			if shown, ok := literalDefault(item[j+1:]); !ok {
				keys.volatileDefaults[strings.ToLower(col)] = shown
			}
		}
	}
}

// literalDefault reads the expression after DEFAULT: ok only for a
// literal (a string, a number, with a sign or in parentheses, NULL, TRUE,
// FALSE) followed by nothing or by the next constraint's keyword. Anything
// else — CURRENT_TIMESTAMP, a function call, a cast, an operator — may give
// another value on each insert. shown is the default as written, shortened.
func literalDefault(s []sqlTok) (shown string, ok bool) {
	k := 0
	paren := 0
	for k < len(s) && s[k].punct("(") {
		paren++
		k++
	}
	if k < len(s) && (s[k].punct("-") || s[k].punct("+")) {
		k++
	}
	lit := k < len(s) && (s[k].kind == tString || s[k].kind == tNumber || s[k].is("null") || s[k].is("true") || s[k].is("false"))
	end := k + 1
	for range paren {
		if end < len(s) && s[end].punct(")") {
			end++
		} else {
			lit = false
		}
	}
	if lit && (end == len(s) || s[end].kind == tIdent) {
		return "", true
	}
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
	return b.String(), false
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
