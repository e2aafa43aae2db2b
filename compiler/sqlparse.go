package compiler

import (
	"fmt"
	"strings"
)

// The insert_query reader: a strict recursive-descent parser for the one
// statement shape the proof can reason about,
//
//	INSERT [OR IGNORE|OR REPLACE | IGNORE] INTO t [AS a] (cols)
//	  VALUES (exprs) [, (exprs)]… [AS new[(cols)]]
//	  [ON CONFLICT [(cols)] DO NOTHING | DO UPDATE SET col = expr, … [WHERE expr]
//	   | ON DUPLICATE KEY UPDATE col = expr, …]
//	  [RETURNING exprs] [;]
//
// (and REPLACE INTO …), over expressions built from literals, bound
// parameters, column references, operators, CAST and function calls. It
// fails, with the reason, on anything else: there is no "skip what looks
// unfamiliar", so what it accepts it has read in full.

type sqlExprKind int

const (
	eLit     sqlExprKind = iota // string, number, TRUE, FALSE
	eNull                       // NULL
	eParam                      // a ${…} placeholder
	eCol                        // [qual.]name
	eCall                       // name(args)
	eCast                       // CAST(x AS t), x::t
	eUnary                      // - x, NOT x
	eBinary                     // x op y
	eDefault                    // DEFAULT in a VALUES row
	eStar                       // * in RETURNING
)

type sqlExpr struct {
	kind sqlExprKind
	text string // literal text, lower-case function name, operator, column name, cast type
	qual string // a column's qualifier
	num  int    // eParam: index into the template's parts
	args []*sqlExpr
	str  bool // eLit: a string literal
}

// sqlSet is one assignment of DO UPDATE SET / ON DUPLICATE KEY UPDATE.
type sqlSet struct {
	col string
	val *sqlExpr
}

type conflictKind int

const (
	conflictNone    conflictKind = iota // plain INSERT
	conflictColumns                     // ON CONFLICT (cols) …
	conflictAnyKey                      // any unique key: ON CONFLICT DO NOTHING without target, INSERT IGNORE, OR IGNORE, REPLACE, ON DUPLICATE KEY UPDATE
)

// sqlInsert is an insert_query as read.
type sqlInsert struct {
	table, alias string
	columns      []string
	rows         [][]*sqlExpr
	// MySQL's row alias: VALUES (…) AS new [(c1, c2)]
	rowAlias     string
	rowAliasCols []string
	kind         conflictKind
	targets      []string
	replace      bool // REPLACE INTO / INSERT OR REPLACE: the row is deleted and written anew
	update       bool // DO UPDATE / ON DUPLICATE KEY UPDATE
	sets         []sqlSet
	where        *sqlExpr // DO UPDATE … WHERE
	returning    bool
	clause       string // the conflict handling as a person would write it
}

type sqlParser struct {
	toks []sqlTok
	pos  int
	d    sqlDialect
}

// sqlCannot is why the reader gave up: the statement is outside what it
// reads in full.
type sqlCannot struct{ msg string }

func (e *sqlCannot) Error() string { return e.msg }

func (p *sqlParser) peek() sqlTok { return p.toks[p.pos] }
func (p *sqlParser) next() sqlTok {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *sqlParser) accept(word string) bool {
	if p.peek().is(word) {
		p.pos++
		return true
	}
	return false
}

func (p *sqlParser) acceptPunct(s string) bool {
	if p.peek().punct(s) {
		p.pos++
		return true
	}
	return false
}

func (p *sqlParser) fail(format string, args ...any) {
	panic(&sqlCannot{msg: fmt.Sprintf(format, args...)})
}

func (p *sqlParser) expect(word string) {
	if !p.accept(word) {
		p.fail("expected %s, found %s", strings.ToUpper(word), p.peek())
	}
}

func (p *sqlParser) expectPunct(s string) {
	if !p.acceptPunct(s) {
		p.fail("expected %q, found %s", s, p.peek())
	}
}

// allows reports whether the dialect has a form; sqlAnyDialect accepts
// the union, since the statement is meant for whichever database the url
// names at run time (a form that database lacks fails every write loudly).
func (p *sqlParser) allows(ds ...sqlDialect) bool {
	if p.d == sqlAnyDialect {
		return true
	}
	for _, d := range ds {
		if d == p.d {
			return true
		}
	}
	return false
}

// sqlReserved are words that end an expression or a name, never a column.
var sqlReserved = map[string]bool{
	"select": true, "from": true, "where": true, "values": true, "on": true, "do": true,
	"set": true, "returning": true, "and": true, "or": true, "not": true, "as": true, "into": true,
	"conflict": true, "duplicate": true, "update": true, "nothing": true, "with": true, "union": true,
	"is": true, "in": true, "like": true, "between": true, "case": true, "when": true, "then": true,
	"else": true, "end": true, "default": true, "null": true, "true": true, "false": true, "cast": true,
	"collate": true, "escape": true, "glob": true, "regexp": true, "match": true, "exists": true,
}

// name reads an identifier, bare or quoted.
func (p *sqlParser) name(what string) string {
	t := p.peek()
	switch {
	case t.kind == tQIdent:
		p.pos++
		return t.text
	case t.kind == tIdent && !sqlReserved[strings.ToLower(t.text)]:
		p.pos++
		return t.text
	}
	p.fail("expected %s, found %s", what, t)
	return ""
}

func (p *sqlParser) nameList(what string) []string {
	p.expectPunct("(")
	var out []string
	for {
		out = append(out, p.name(what))
		if p.acceptPunct(")") {
			return out
		}
		p.expectPunct(",")
	}
}

// parseSQLInsert reads an insert_query skeleton's tokens.
func parseSQLInsert(toks []sqlTok, d sqlDialect) (ins *sqlInsert, err error) {
	p := &sqlParser{toks: toks, d: d}
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(*sqlCannot)
			if !ok {
				panic(r)
			}
			ins, err = nil, c
		}
	}()
	return p.insert(), nil
}

func (p *sqlParser) insert() *sqlInsert {
	ins := &sqlInsert{}
	switch {
	case p.peek().is("with"):
		p.fail("a WITH clause in front of the INSERT")
	case p.accept("replace"):
		if !p.allows(sqlSQLite, sqlMySQL) {
			p.fail("REPLACE is not a %s statement", p.d)
		}
		ins.replace, ins.kind, ins.clause = true, conflictAnyKey, "REPLACE INTO"
	case p.accept("insert"):
		switch {
		case p.accept("or"):
			if !p.allows(sqlSQLite) {
				p.fail("INSERT OR … is SQLite's form, not %s's", p.d)
			}
			switch {
			case p.accept("ignore"):
				ins.kind, ins.clause = conflictAnyKey, "INSERT OR IGNORE"
			case p.accept("replace"):
				ins.replace, ins.kind, ins.clause = true, conflictAnyKey, "INSERT OR REPLACE"
			default:
				p.fail("INSERT OR %s is not a conflict resolution mqb reads (OR IGNORE and OR REPLACE are)", p.peek())
			}
		case p.accept("ignore"):
			if !p.allows(sqlMySQL) {
				p.fail("INSERT IGNORE is MySQL's form, not %s's", p.d)
			}
			ins.kind, ins.clause = conflictAnyKey, "INSERT IGNORE"
		}
	default:
		p.fail("the statement is not an INSERT (it starts with %s)", p.peek())
	}
	p.expect("into")
	ins.table = p.name("a table name")
	if p.acceptPunct(".") {
		ins.table += "." + p.name("a table name")
	}
	if p.peek().is("as") && p.allows(sqlSQLite, sqlPostgres) {
		p.next()
		ins.alias = p.name("a table alias")
	}
	if !p.peek().punct("(") {
		p.fail("the INSERT names no column list")
	}
	ins.columns = p.nameList("a column name")
	switch {
	case p.accept("values"), p.allows(sqlMySQL) && p.accept("value"):
	case p.peek().is("select") || p.peek().is("with") || p.peek().punct("("):
		p.fail("INSERT … SELECT writes rows mqb cannot see")
	case p.peek().is("default"):
		p.fail("INSERT … DEFAULT VALUES binds no value")
	default:
		p.fail("expected VALUES, found %s", p.peek())
	}
	for {
		p.expectPunct("(")
		var row []*sqlExpr
		for {
			row = append(row, p.expr())
			if p.acceptPunct(")") {
				break
			}
			p.expectPunct(",")
		}
		if len(row) != len(ins.columns) {
			p.fail("VALUES row %d has %d values for %d columns", len(ins.rows)+1, len(row), len(ins.columns))
		}
		ins.rows = append(ins.rows, row)
		if !p.acceptPunct(",") {
			break
		}
	}
	if p.peek().is("as") && p.allows(sqlMySQL) {
		p.next()
		ins.rowAlias = p.name("a row alias")
		if p.peek().punct("(") {
			ins.rowAliasCols = p.nameList("a column alias")
			if len(ins.rowAliasCols) != len(ins.columns) {
				p.fail("the row alias %s names %d columns for %d", ins.rowAlias, len(ins.rowAliasCols), len(ins.columns))
			}
		}
	}
	switch {
	case p.peek().is("on") && p.toks[p.pos+1].is("conflict"):
		if !p.allows(sqlSQLite, sqlPostgres) {
			p.fail("ON CONFLICT is not %s's form (it has ON DUPLICATE KEY UPDATE)", p.d)
		}
		if ins.kind != conflictNone {
			p.fail("%s and ON CONFLICT in one statement", ins.clause)
		}
		p.pos += 2
		p.onConflict(ins)
		if p.peek().is("on") {
			p.fail("a second ON CONFLICT clause")
		}
	case p.peek().is("on") && p.toks[p.pos+1].is("duplicate"):
		if !p.allows(sqlMySQL) {
			p.fail("ON DUPLICATE KEY UPDATE is MySQL's form, not %s's", p.d)
		}
		if ins.replace {
			p.fail("REPLACE with ON DUPLICATE KEY UPDATE")
		}
		p.pos += 2
		p.expect("key")
		p.expect("update")
		ins.kind, ins.update, ins.clause = conflictAnyKey, true, "ON DUPLICATE KEY UPDATE"
		ins.sets = p.assignments(ins)
	}
	if p.accept("returning") {
		ins.returning = true
		for {
			if p.acceptPunct("*") {
			} else {
				p.expr()
				if p.accept("as") {
					p.name("an output name")
				} else if t := p.peek(); t.kind == tQIdent || t.kind == tIdent && !sqlReserved[strings.ToLower(t.text)] {
					p.next()
				}
			}
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	p.acceptPunct(";")
	if t := p.peek(); t.kind != tEOF {
		if p.toks[p.pos-1].punct(";") {
			p.fail("a second statement follows the INSERT after `;` (%s …)", t)
		}
		p.fail("the INSERT goes on with %s, which mqb does not read", t)
	}
	return ins
}

func (p *sqlParser) onConflict(ins *sqlInsert) {
	ins.kind = conflictAnyKey
	target := ""
	switch {
	case p.peek().punct("("):
		ins.kind = conflictColumns
		ins.targets = p.nameList("a conflict column (an expression or COLLATE target is not read)")
		if p.peek().is("where") {
			p.fail("a conflict target with WHERE (a partial index)")
		}
		target = " (" + strings.Join(ins.targets, ", ") + ")"
	case p.peek().is("on"):
		p.fail("ON CONFLICT ON CONSTRAINT names a constraint whose columns mqb cannot see; name the columns instead")
	}
	p.expect("do")
	switch {
	case p.accept("nothing"):
		ins.clause = "ON CONFLICT" + target + " DO NOTHING"
	case p.accept("update"):
		if target == "" {
			p.fail("ON CONFLICT DO UPDATE without a conflict target")
		}
		p.expect("set")
		ins.update = true
		ins.clause = "ON CONFLICT" + target + " DO UPDATE"
		ins.sets = p.assignments(ins)
		if p.accept("where") {
			ins.where = p.expr()
		}
	default:
		p.fail("expected DO NOTHING or DO UPDATE, found %s", p.peek())
	}
}

func (p *sqlParser) assignments(ins *sqlInsert) []sqlSet {
	var out []sqlSet
	for {
		if p.peek().punct("(") {
			p.fail("a multi-column assignment (a, b) = (…)")
		}
		col := p.name("a column to set")
		if p.acceptPunct(".") {
			if !strings.EqualFold(col, ins.table) && !strings.EqualFold(col, ins.alias) {
				p.fail("SET %s.… names neither the table nor its alias", col)
			}
			col = p.name("a column to set")
		}
		p.expectPunct("=")
		out = append(out, sqlSet{col: col, val: p.expr()})
		if !p.acceptPunct(",") {
			return out
		}
	}
}

// Expressions, loosest binding first.

func (p *sqlParser) expr() *sqlExpr { return p.orExpr() }

func (p *sqlParser) orExpr() *sqlExpr {
	l := p.andExpr()
	for p.accept("or") {
		l = &sqlExpr{kind: eBinary, text: "or", args: []*sqlExpr{l, p.andExpr()}}
	}
	return l
}

func (p *sqlParser) andExpr() *sqlExpr {
	l := p.notExpr()
	for p.accept("and") {
		l = &sqlExpr{kind: eBinary, text: "and", args: []*sqlExpr{l, p.notExpr()}}
	}
	return l
}

func (p *sqlParser) notExpr() *sqlExpr {
	if p.accept("not") {
		return &sqlExpr{kind: eUnary, text: "not", args: []*sqlExpr{p.notExpr()}}
	}
	return p.cmpExpr()
}

func (p *sqlParser) cmpExpr() *sqlExpr {
	l := p.addExpr()
	for _, op := range []string{"=", "==", "<>", "!=", "<", ">", "<=", ">="} {
		if p.acceptPunct(op) {
			return &sqlExpr{kind: eBinary, text: op, args: []*sqlExpr{l, p.addExpr()}}
		}
	}
	if p.accept("is") {
		op := "is"
		if p.accept("not") {
			op = "is not"
		}
		return &sqlExpr{kind: eBinary, text: op, args: []*sqlExpr{l, p.addExpr()}}
	}
	return l
}

func (p *sqlParser) addExpr() *sqlExpr {
	l := p.mulExpr()
	for {
		t := p.peek()
		if !(t.punct("+") || t.punct("-") || t.punct("||") || t.punct("->") || t.punct("->>")) {
			return l
		}
		p.next()
		l = &sqlExpr{kind: eBinary, text: t.text, args: []*sqlExpr{l, p.mulExpr()}}
	}
}

func (p *sqlParser) mulExpr() *sqlExpr {
	l := p.unary()
	for {
		t := p.peek()
		if !(t.punct("*") || t.punct("/") || t.punct("%")) {
			return l
		}
		p.next()
		l = &sqlExpr{kind: eBinary, text: t.text, args: []*sqlExpr{l, p.unary()}}
	}
}

func (p *sqlParser) unary() *sqlExpr {
	if t := p.peek(); t.punct("-") || t.punct("+") {
		p.next()
		return &sqlExpr{kind: eUnary, text: t.text, args: []*sqlExpr{p.unary()}}
	}
	e := p.primary()
	for p.peek().punct("::") {
		if !p.allows(sqlPostgres) {
			p.fail("`::` casts are PostgreSQL's form, not %s's", p.d)
		}
		p.next()
		e = &sqlExpr{kind: eCast, text: p.typeName(), args: []*sqlExpr{e}}
	}
	return e
}

// typeName reads a type such as integer, varchar(20), double precision,
// timestamp with time zone, text[].
func (p *sqlParser) typeName() string {
	var words []string
	for {
		t := p.peek()
		if t.kind != tIdent && t.kind != tQIdent || len(words) > 0 && (t.is("as") || sqlReserved[strings.ToLower(t.text)] && !t.is("with")) {
			break
		}
		p.next()
		words = append(words, strings.ToLower(t.text))
	}
	if len(words) == 0 {
		p.fail("expected a type name, found %s", p.peek())
	}
	if p.acceptPunct("(") {
		for {
			if t := p.next(); t.kind != tNumber {
				p.fail("expected a number in a type's size, found %s", t)
			}
			if p.acceptPunct(")") {
				break
			}
			p.expectPunct(",")
		}
	}
	return strings.Join(words, " ")
}

func (p *sqlParser) primary() *sqlExpr {
	t := p.next()
	switch t.kind {
	case tNumber:
		return &sqlExpr{kind: eLit, text: t.text}
	case tString:
		return &sqlExpr{kind: eLit, text: t.text, str: true}
	case tParam:
		return &sqlExpr{kind: eParam, num: t.num}
	case tPunct:
		if t.text == "(" {
			if p.peek().is("select") || p.peek().is("with") || p.peek().is("values") {
				p.fail("a subquery")
			}
			e := p.expr()
			if p.peek().punct(",") {
				p.fail("a row value (a, b, …)")
			}
			p.expectPunct(")")
			return e
		}
		if t.text == "*" {
			return &sqlExpr{kind: eStar}
		}
	case tQIdent:
		return p.columnRef(t.text)
	case tIdent:
		low := strings.ToLower(t.text)
		switch low {
		case "null":
			return &sqlExpr{kind: eNull}
		case "true", "false":
			return &sqlExpr{kind: eLit, text: low}
		case "default":
			return &sqlExpr{kind: eDefault}
		case "cast":
			p.expectPunct("(")
			inner := p.expr()
			p.expect("as")
			typ := p.typeName()
			p.expectPunct(")")
			return &sqlExpr{kind: eCast, text: typ, args: []*sqlExpr{inner}}
		case "case":
			p.fail("a CASE expression")
		case "exists", "select":
			p.fail("a subquery")
		}
		if sqlReserved[low] && !(low == "values" && p.peek().punct("(")) {
			p.fail("unexpected %s", strings.ToUpper(t.text))
		}
		if p.peek().punct("(") {
			p.next()
			call := &sqlExpr{kind: eCall, text: low}
			if p.acceptPunct(")") {
				return call
			}
			if p.peek().is("distinct") || p.peek().is("all") {
				p.fail("an aggregate call %s(%s …)", low, strings.ToUpper(p.peek().text))
			}
			for {
				call.args = append(call.args, p.expr())
				if p.acceptPunct(")") {
					break
				}
				p.expectPunct(",")
			}
			if p.peek().is("over") || p.peek().is("filter") || p.peek().is("within") {
				p.fail("a window or aggregate call %s(…) %s", low, strings.ToUpper(p.peek().text))
			}
			return call
		}
		return p.columnRef(t.text)
	}
	p.fail("unexpected %s", t)
	return nil
}

func (p *sqlParser) columnRef(first string) *sqlExpr {
	if p.acceptPunct(".") {
		second := p.name("a column name")
		if p.acceptPunct(".") {
			return &sqlExpr{kind: eCol, qual: first + "." + second, text: p.name("a column name")}
		}
		return &sqlExpr{kind: eCol, qual: first, text: second}
	}
	return &sqlExpr{kind: eCol, text: first}
}

// sqlText renders an expression for a reason, with placeholders as
// written in the template.
func sqlText(e *sqlExpr, parts []partInfo) string {
	switch e.kind {
	case eLit:
		if e.str {
			return "'" + strings.ReplaceAll(e.text, "'", "''") + "'"
		}
		return e.text
	case eNull:
		return "NULL"
	case eDefault:
		return "DEFAULT"
	case eStar:
		return "*"
	case eParam:
		if e.num < len(parts) {
			return "${" + parts[e.num].expr + "}"
		}
		return "${…}"
	case eCol:
		if e.qual != "" {
			return e.qual + "." + e.text
		}
		return e.text
	case eCall:
		args := make([]string, len(e.args))
		for i, a := range e.args {
			args[i] = sqlText(a, parts)
		}
		return e.text + "(" + strings.Join(args, ", ") + ")"
	case eCast:
		return "CAST(" + sqlText(e.args[0], parts) + " AS " + e.text + ")"
	case eUnary:
		if e.text == "not" {
			return "NOT " + sqlText(e.args[0], parts)
		}
		return e.text + sqlText(e.args[0], parts)
	case eBinary:
		op := e.text
		if op == "and" || op == "or" || op == "is" || op == "is not" {
			op = strings.ToUpper(op)
		}
		return sqlText(e.args[0], parts) + " " + op + " " + sqlText(e.args[1], parts)
	}
	return "?"
}

// sameSQL reports whether two expressions are written alike (names
// compared without case).
func sameSQL(a, b *sqlExpr) bool {
	if a.kind != b.kind || !strings.EqualFold(a.text, b.text) || !strings.EqualFold(a.qual, b.qual) ||
		a.num != b.num || a.str != b.str || len(a.args) != len(b.args) {
		return false
	}
	if a.kind == eLit && a.text != b.text {
		return false
	}
	for i := range a.args {
		if !sameSQL(a.args[i], b.args[i]) {
			return false
		}
	}
	return true
}
