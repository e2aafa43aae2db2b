package compiler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/internal/lazyre"
)

// What the proof of a sql sink needs from its insert_query: which values
// are the same on every write of a record, whether the conflict handling
// converges, and which unique key it relies on.

var placeholderRE = lazyre.New("\x01([0-9]+)\x02")

// skeleton joins a template's literal text with a marker per placeholder,
// \x01N\x02 for part N. The marker bytes belong to skeleton alone: a
// literal that holds one itself is refused, as its bytes would read as a
// marker (a placeholder made up of text, or a malformed one), so every
// marker lexSQL meets in a skeleton is a placeholder.
func skeleton(parts []partInfo) (string, error) {
	var b strings.Builder
	for i, p := range parts {
		if p.isExpr {
			fmt.Fprintf(&b, "\x01%d\x02", i)
			continue
		}
		if j := strings.IndexAny(p.lit, "\x01\x02"); j >= 0 {
			return "", &sqlLexError{msg: fmt.Sprintf("it holds a U+%04X control character, which is not SQL mqb reads", p.lit[j])}
		}
		b.WriteString(p.lit)
	}
	return b.String(), nil
}

// showValue renders a skeleton fragment with its placeholders as written.
func showValue(v string, parts []partInfo) string {
	return placeholderRE().ReplaceAllStringFunc(v, func(m string) string {
		i, _ := strconv.Atoi(m[1 : len(m)-1])
		if i < len(parts) {
			return "${" + parts[i].expr + "}"
		}
		return m
	})
}

// quotedPlaceholderFix rewrites the body of a quoted SQL string with
// placeholders, such as ord-\x01N\x02, as the one placeholder that builds
// the whole value: ${"ord-" + payload.id}.
func quotedPlaceholderFix(fragment string, parts []partInfo) string {
	body := fragment
	if len(body) >= 2 && (body[0] == '\'' || body[0] == '"') && body[len(body)-1] == body[0] {
		body = body[1 : len(body)-1]
	}
	var terms []string
	last := 0
	for _, m := range placeholderRE().FindAllStringSubmatchIndex(body, -1) {
		if m[0] > last {
			terms = append(terms, strconv.Quote(body[last:m[0]]))
		}
		i, _ := strconv.Atoi(body[m[2]:m[3]])
		expr := "…"
		if i < len(parts) {
			expr = parts[i].expr
		}
		if strings.ContainsAny(expr, "+-*/ ?:") && !(len(terms) == 0 && m[1] == len(body)) {
			expr = "(" + expr + ")"
		}
		terms = append(terms, expr)
		last = m[1]
	}
	if last < len(body) {
		terms = append(terms, strconv.Quote(body[last:]))
	}
	return "${" + strings.Join(terms, " + ") + "}"
}

// sqlDeterministic are the functions known to return the same result for
// the same arguments on every call, per dialect. Anything not listed is
// treated as per-delivery: an allow-list, never a deny-list.
var sqlDeterministic = map[sqlDialect]map[string]bool{
	sqlSQLite: setOf("lower", "upper", "trim", "ltrim", "rtrim", "coalesce", "nullif", "ifnull", "abs",
		"round", "length", "substr", "substring", "replace", "instr", "hex", "unhex", "printf", "format", "quote",
		"typeof", "iif", "json", "json_extract", "json_object", "json_array", "json_quote", "min", "max", "char", "unicode"),
	sqlPostgres: setOf("lower", "upper", "trim", "ltrim", "rtrim", "btrim", "coalesce", "nullif", "abs",
		"round", "length", "char_length", "substr", "substring", "replace", "concat", "concat_ws", "md5",
		"lpad", "rpad", "left", "right", "split_part", "greatest", "least", "json_build_object",
		"jsonb_build_object", "json_build_array", "jsonb_build_array", "to_json", "to_jsonb", "initcap"),
	sqlMySQL: setOf("lower", "upper", "lcase", "ucase", "trim", "ltrim", "rtrim", "coalesce", "nullif", "ifnull",
		"abs", "round", "length", "char_length", "substr", "substring", "replace", "concat", "concat_ws",
		"hex", "unhex", "md5", "sha1", "sha2", "lpad", "rpad", "left", "right", "greatest", "least",
		"json_object", "json_array", "json_extract", "json_quote"),
}

// sqlVolatile are functions known to differ on every call: they get a
// plainer reason than "not on the allow-list". The list decides nothing.
var sqlVolatile = setOf("now", "random", "rand", "randomblob", "gen_random_uuid", "uuid", "uuid_generate_v4",
	"uuid_short", "nextval", "sysdate", "clock_timestamp", "current_timestamp", "statement_timestamp",
	"transaction_timestamp", "localtimestamp", "curtime", "curdate", "unix_timestamp", "datetime", "date",
	"time", "julianday", "strftime", "unixepoch", "utc_timestamp", "last_insert_rowid", "last_insert_id", "changes")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// deterministicIn reports whether fn is on d's allow-list; under
// sqlAnyDialect it must be on every dialect's.
func deterministicIn(fn string, d sqlDialect) bool {
	if d != sqlAnyDialect {
		return sqlDeterministic[d][fn]
	}
	for _, set := range sqlDeterministic {
		if !set[fn] {
			return false
		}
	}
	return true
}

// pgSpecialDates are PostgreSQL's date/time input strings that read the
// clock when cast: '…'::timestamp.
var pgSpecialDates = setOf("now", "today", "tomorrow", "yesterday", "current")

// sqlStability is the stability of a VALUES expression: every placeholder
// in it stable, every function on the dialect's allow-list, nothing the
// analyser cannot see (a column default, a bare name).
func sqlStability(e *sqlExpr, parts []partInfo, d sqlDialect) stability {
	switch e.kind {
	case eLit, eNull:
		return stableValue
	case eParam:
		if e.num < len(parts) {
			return parts[e.num].stab
		}
		return stableValue
	case eDefault:
		return perDelivery("DEFAULT writes the column's default, which mqb cannot see")
	case eStar:
		return perDelivery("* is not a value")
	case eCol:
		if e.qual == "" && sqlVolatile[strings.ToLower(e.text)] {
			return perDelivery("SQL %s differs on every write", strings.ToUpper(e.text))
		}
		return perDelivery("the bare name %s (an SQL keyword or a column) is not a value known to be the same on every write", sqlText(e, parts))
	case eCall:
		if !deterministicIn(e.text, d) {
			if sqlVolatile[e.text] {
				return perDelivery("SQL %s() differs on every write", e.text)
			}
			return perDelivery("SQL function %s() is not on mqb's %s allow-list of deterministic functions", e.text, d)
		}
	case eCast:
		if a := e.args[0]; a.kind == eLit && a.str && d != sqlMySQL && pgSpecialDates[strings.ToLower(strings.TrimSpace(a.text))] {
			return perDelivery("CAST('%s' AS %s) reads the clock", a.text, e.text)
		}
	}
	st := stableValue
	for _, a := range e.args {
		st = both(st, sqlStability(a, parts, d))
	}
	return st
}

// columnStability is the stability of column i over every VALUES row,
// with the first per-delivery value.
func (ins *sqlInsert) columnStability(i int, parts []partInfo, d sqlDialect) (stability, *sqlExpr, int) {
	for r, row := range ins.rows {
		if st := sqlStability(row[i], parts, d); !st.Stable {
			return st, row[i], r
		}
	}
	return stableValue, ins.rows[0][i], 0
}

// columnProcess is the stability of the value of column i in the first
// VALUES row where it rests on something outside the record (an env() it
// reads); its Process is "" when no row's does.
func (ins *sqlInsert) columnProcess(i int, parts []partInfo, d sqlDialect) stability {
	var out stability
	for _, row := range ins.rows {
		if st := sqlStability(row[i], parts, d); st.Stable && st.Process != "" {
			if out.Process == "" {
				out = st
			} else {
				out.Reads = addReads(out.Reads, st.Reads)
			}
		}
	}
	return out
}

// isExistingColumn reports whether e names col of the row already in the
// table: col, t.col or alias.col.
func (ins *sqlInsert) isExistingColumn(e *sqlExpr, col string) bool {
	return e.kind == eCol && strings.EqualFold(e.text, col) &&
		(e.qual == "" || sameTable(e.qual, ins.table) || ins.alias != "" && strings.EqualFold(e.qual, ins.alias))
}

// isInsertedValue reports whether e stands for the value the INSERT
// writes for column i: excluded.col, VALUES(col), new.col under a MySQL
// row alias, or the very expression of the (single) VALUES row.
func (ins *sqlInsert) isInsertedValue(e *sqlExpr, i int, d sqlDialect) bool {
	col := ins.columns[i]
	switch {
	case e.kind == eCol && strings.EqualFold(e.qual, "excluded") && d != sqlMySQL:
		return strings.EqualFold(e.text, col)
	case e.kind == eCall && e.text == "values" && len(e.args) == 1 && d != sqlSQLite && d != sqlPostgres:
		a := e.args[0]
		return a.kind == eCol && a.qual == "" && strings.EqualFold(a.text, col)
	case e.kind == eCol && ins.rowAlias != "" && strings.EqualFold(e.qual, ins.rowAlias):
		if ins.rowAliasCols != nil {
			return strings.EqualFold(e.text, ins.rowAliasCols[i])
		}
		return strings.EqualFold(e.text, col)
	case len(ins.rows) == 1:
		return sameSQL(e, ins.rows[0][i])
	}
	return false
}

// versionGuard reports whether the DO UPDATE's WHERE is a version guard,
// `excluded.v > t.v` (or `t.v < excluded.v`), over a column v the INSERT
// binds to a stable value; it returns v.
func (ins *sqlInsert) versionGuard(parts []partInfo, d sqlDialect) (string, bool) {
	w := ins.where
	if w == nil || w.kind != eBinary || (w.text != ">" && w.text != "<") {
		return "", false
	}
	newer, older := w.args[0], w.args[1]
	if w.text == "<" {
		newer, older = older, newer
	}
	if newer.kind != eCol || !strings.EqualFold(newer.qual, "excluded") || !ins.isExistingColumn(older, newer.text) {
		return "", false
	}
	i := indexOf(ins.columns, newer.text)
	if i < 0 {
		return "", false
	}
	if st, _, _ := ins.columnStability(i, parts, d); !st.Stable {
		return "", false
	}
	return ins.columns[i], true
}

// convergence checks that every assignment of the update writes a column
// exactly the value the INSERT writes for it, a value stable across
// replays, so applying a record twice leaves the row as once. It returns
// the first assignment that does not, with why.
func (ins *sqlInsert) convergence(parts []partInfo, d sqlDialect) (ok bool, why string) {
	for _, s := range ins.sets {
		shown := s.col + " = " + sqlText(s.val, parts)
		i := indexOf(ins.columns, s.col)
		if ins.isExistingColumn(s.val, s.col) {
			continue // col = col changes nothing
		}
		if i < 0 {
			return false, fmt.Sprintf("SET %s writes a column the INSERT does not write, so a replay changes the row the first write left", shown)
		}
		if !ins.isInsertedValue(s.val, i, d) {
			return false, fmt.Sprintf("SET %s does not assign %s the value the INSERT writes for it, so a replay changes the row again (only col = excluded.col, or VALUES(col) on MySQL, converges)", shown, s.col)
		}
		if st, v, _ := ins.columnStability(i, parts, d); !st.Stable {
			return false, fmt.Sprintf("SET %s rewrites %s on a replay with %s, which is per-delivery (%s)", shown, s.col, sqlText(v, parts), st.Why)
		}
	}
	return true, ""
}

// usesPayload reports whether column i is bound, in some row, to a
// placeholder that reads the payload.
func (ins *sqlInsert) usesPayload(i int, parts []partInfo) bool {
	var walk func(e *sqlExpr) bool
	walk = func(e *sqlExpr) bool {
		if e.kind == eParam && e.num < len(parts) && strings.Contains(parts[e.num].expr, "payload") {
			return true
		}
		for _, a := range e.args {
			if walk(a) {
				return true
			}
		}
		return false
	}
	for _, row := range ins.rows {
		if walk(row[i]) {
			return true
		}
	}
	return false
}

// valuesShown renders column i's value in every VALUES row.
func (ins *sqlInsert) valuesShown(i int, parts []partInfo) string {
	shown := make([]string, len(ins.rows))
	for r, row := range ins.rows {
		shown[r] = sqlText(row[i], parts)
	}
	return strings.Join(shown, " | ")
}
