package compiler

import (
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"
)

// conflictKind is how an INSERT absorbs a row whose key already exists.
type conflictKind int

const (
	conflictNone    conflictKind = iota // plain INSERT
	conflictColumns                     // ON CONFLICT (cols) DO NOTHING | DO UPDATE
	conflictAnyKey                      // ON DUPLICATE KEY UPDATE, INSERT IGNORE, ON CONFLICT DO NOTHING with no target, REPLACE
)

// sqlInsert is what the proof needs from an insert_query: the column list,
// the VALUES expression bound to each column, and the conflict clause.
type sqlInsert struct {
	table   string
	columns []string
	values  []string // skeleton text per column; placeholders are \x01N\x02
	kind    conflictKind
	targets []string // conflict columns of ON CONFLICT (…)
	clause  string   // the clause as a person would write it
}

var (
	placeholderRE = regexp.MustCompile("\x01([0-9]+)\x02")
	insertHeadRE  = regexp.MustCompile(`(?is)^\s*(insert|replace)(\s+or\s+(ignore|replace))?(\s+ignore)?\s+into\s+([^\s(]+)\s*\(`)
	valuesRE      = regexp.MustCompile(`(?is)^\s*values\s*\(`)
	onConflictRE  = regexp.MustCompile(`(?is)\bon\s+conflict\b\s*(\(([^)]*)\)|on\s+constraint\s+(\S+))?(.*?)\bdo\s+(nothing|update)\b`)
	onDuplicateRE = regexp.MustCompile(`(?is)\bon\s+duplicate\s+key\s+update\b`)
	volatileSQL   = []string{"now()", "current_timestamp", "random()", "rand()", "gen_random_uuid()", "uuid()", "uuid_generate_v4()", "nextval(", "sysdate()", "clock_timestamp()"}
)

// skeleton joins a template's literal text with a marker per placeholder.
func skeleton(parts []partInfo) string {
	var b strings.Builder
	for i, p := range parts {
		if p.isExpr {
			fmt.Fprintf(&b, "\x01%d\x02", i)
		} else {
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

// parseInsert analyses an insert_query skeleton. ok is false when the
// statement is not an `INSERT … (cols) VALUES (…)` the proof can read.
func parseInsert(sql string) (ins sqlInsert, ok bool) {
	sql = stripSQLComments(sql)
	head := insertHeadRE.FindStringSubmatchIndex(sql)
	if head == nil {
		return ins, false
	}
	verb := strings.ToLower(sql[head[2]:head[3]])
	orWord := ""
	if head[6] >= 0 {
		orWord = strings.ToLower(sql[head[6]:head[7]])
	}
	ignore := head[8] >= 0
	ins.table = sql[head[10]:head[11]]
	cols, rest, good := balanced(sql[head[1]:])
	if !good {
		return ins, false
	}
	for _, c := range splitTop(cols) {
		ins.columns = append(ins.columns, strings.Trim(strings.TrimSpace(c), "\"`[]"))
	}
	vm := valuesRE.FindStringIndex(rest)
	if vm == nil {
		return ins, false
	}
	vals, rest, good := balanced(rest[vm[1]:])
	if !good {
		return ins, false
	}
	for _, v := range splitTop(vals) {
		ins.values = append(ins.values, strings.TrimSpace(v))
	}
	if len(ins.values) != len(ins.columns) {
		return ins, false
	}
	switch {
	case verb == "replace" || orWord == "replace":
		ins.kind, ins.clause = conflictAnyKey, "REPLACE"
	case ignore:
		ins.kind, ins.clause = conflictAnyKey, "INSERT IGNORE"
	case orWord == "ignore":
		ins.kind, ins.clause = conflictAnyKey, "INSERT OR IGNORE"
	}
	if m := onConflictRE.FindStringSubmatch(rest); m != nil {
		action := "DO " + strings.ToUpper(m[5])
		switch {
		case m[2] != "" || strings.HasPrefix(strings.TrimSpace(m[1]), "("):
			for _, c := range splitTop(m[2]) {
				ins.targets = append(ins.targets, strings.Trim(strings.TrimSpace(c), "\"`"))
			}
			ins.kind = conflictColumns
			ins.clause = fmt.Sprintf("ON CONFLICT (%s) %s", strings.Join(ins.targets, ", "), action)
		case m[3] != "":
			ins.kind = conflictAnyKey
			ins.clause = fmt.Sprintf("ON CONFLICT ON CONSTRAINT %s %s", m[3], action)
		default:
			ins.kind = conflictAnyKey
			ins.clause = "ON CONFLICT " + action
		}
	} else if onDuplicateRE.MatchString(rest) {
		ins.kind, ins.clause = conflictAnyKey, "ON DUPLICATE KEY UPDATE"
	}
	return ins, true
}

// balanced returns the text up to the parenthesis closing an already
// opened one, and what follows it.
func balanced(s string) (inside, rest string, ok bool) {
	for i, depth := range unquoted(s, 1) {
		if s[i] == ')' && depth == 0 {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

// splitTop splits at commas outside parentheses and quotes.
func splitTop(s string) []string {
	var out []string
	start := 0
	for i, depth := range unquoted(s, 0) {
		if s[i] == ',' && depth == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" || len(out) > 0 {
		out = append(out, s[start:])
	}
	return out
}

// unquoted yields the index of every byte of s outside '…', "…" and `…`
// quotes, with the parenthesis depth after that byte: counted from start,
// an opening parenthesis is inside the pair it opens, a closing one outside.
func unquoted(s string, start int) iter.Seq2[int, int] {
	return func(yield func(i, depth int) bool) {
		depth := start
		var quote byte
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case quote != 0:
				if c == quote {
					quote = 0
				}
				continue
			case c == '\'' || c == '"' || c == '`':
				quote = c
				continue
			case c == '(':
				depth++
			case c == ')':
				depth--
			}
			if !yield(i, depth) {
				return
			}
		}
	}
}

func stripSQLComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return b.String()
			}
			i += j - 1
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			i += j + 3
			b.WriteByte(' ')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// valueStability is the stability of one VALUES expression: every bound
// placeholder in it must be stable and it must call no volatile function.
func valueStability(v string, parts []partInfo) stability {
	low := strings.ToLower(v)
	for _, f := range volatileSQL {
		if strings.Contains(low, f) {
			return perDelivery("SQL %s differs on every write", strings.TrimSuffix(f, "("))
		}
	}
	st := stableValue
	for _, m := range placeholderRE.FindAllStringSubmatch(v, -1) {
		i, _ := strconv.Atoi(m[1])
		if i < len(parts) {
			st = both(st, parts[i].stab)
		}
	}
	return st
}

// showValue renders a VALUES expression with its placeholders as written.
func showValue(v string, parts []partInfo) string {
	return placeholderRE.ReplaceAllStringFunc(v, func(m string) string {
		i, _ := strconv.Atoi(m[1 : len(m)-1])
		if i < len(parts) {
			return "${" + parts[i].expr + "}"
		}
		return m
	})
}
