package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The shapes below reach rules of the prover the older shapes did not
// (see -reasons, which lists the verdict reasons a range of seeds gets):
//
//   - sql writes the prover must not call idempotent (sqlRuleShape): a
//     DO UPDATE whose WHERE is not a version guard (and one that is, on
//     a stable increasing column), a conflict target the INSERT does not
//     write, and statements the SQL analyser cannot read in full;
//   - a dead-letter table with a key (keyedDLQ), whose own verdict may be
//     effectively-once: its rows are then compared as a multiset, not as
//     a set of positions;
//   - a switch on a per-delivery value whose branches are tables of
//     different shapes (unionSwitch): a replayed record may land in
//     another branch, so the branches are compared by the union of their
//     keys (Artifact.KeyOnly), which must hold every record's key.
//
// Each draws from a stream of its own (Case.sq, Case.dq, Case.un), so a
// seed that draws none of them generates what it did before; CI's fixed
// seeds (1 to 10) never draw them.

// ruleShapes turns the shapes of this file on (tests turn it off to see
// that seeds which draw none of them did not change).
var ruleShapes = true

// onlyRules is the -rules flag: check only the seeds that draw a shape of
// this file.
var onlyRules bool

// pickRuleShapes gives c the streams of this file's shapes.
func pickRuleShapes(c *Case) {
	if !ruleShapes || c.Seed <= 10 {
		return
	}
	c.sq = rand.New(rand.NewPCG(c.Seed, 0x5917))
	c.dq = rand.New(rand.NewPCG(c.Seed, 0xd1e7))
	c.un = rand.New(rand.NewPCG(c.Seed, 0x0410))
}

// sqlRuleShape may replace a SQLite leaf's statement with one of the
// forms the prover must judge by a rule the older draws do not reach. It
// returns the new DDL, verb, conflict clause and statement text (prefix
// and suffix around the INSERT), and ok when it drew one.
type sqlRule struct {
	ddl, verb, conflict string
	// selectForm writes the row with INSERT … SELECT … WHERE true, which
	// the analyser cannot read; with names a CTE in front of the INSERT.
	selectForm bool
	with       string
	mutable    []string
}

func (g *routeGen) sqlRuleShape(table, ddl string, keyed bool, cols []string, twoRows bool) (sqlRule, bool) {
	sq := g.c.sq
	if sq == nil || sq.IntN(100) >= 14 {
		return sqlRule{}, false
	}
	g.c.ruleDrawn = true
	r := sqlRule{ddl: ddl, verb: "INSERT INTO"}
	switch k := sq.IntN(10); {
	case k < 4 && keyed:
		// DO UPDATE … WHERE: the prover calls it convergent only under a
		// version guard (excluded.v > t.v on a column bound to a stable
		// value). big grows with the line number and is stable; the
		// others are not guards (a per-delivery x, >=, <>, a constant).
		conds := []string{
			fmt.Sprintf("excluded.qty <> %s.qty", table),
			fmt.Sprintf("excluded.qty >= %s.qty", table),
			fmt.Sprintf("%s.qty IS NULL OR excluded.qty > 3", table),
			fmt.Sprintf("excluded.x > %s.x", table),
			fmt.Sprintf("excluded.big > %s.big", table),
			fmt.Sprintf("%s.big < excluded.big", table),
		}
		set := "qty = excluded.qty"
		r.mutable = []string{"qty"}
		if slices.Contains(cols, "body") && sq.IntN(2) == 0 {
			set += ", body = excluded.body"
			r.mutable = append(r.mutable, "body")
		}
		r.conflict = fmt.Sprintf("ON CONFLICT (id) DO UPDATE SET %s WHERE %s", set, conds[sq.IntN(len(conds))])
	case k < 7 && !slices.Contains(cols, "x"):
		// A conflict target the INSERT does not write: x is always NULL,
		// which never conflicts, so every replay lands again (or, on a
		// table keyed by id, fails on id and is dead-lettered).
		r.ddl = strings.Replace(ddl, "x TEXT)", "x TEXT UNIQUE)", 1)
		if sq.IntN(3) == 0 {
			r.conflict = "ON CONFLICT (x) DO UPDATE SET qty = excluded.qty"
			r.mutable = []string{"qty"}
		} else {
			r.conflict = "ON CONFLICT (x) DO NOTHING"
		}
	default:
		// SQL the analyser cannot read in full: INSERT … SELECT, or a
		// WITH clause in front of the INSERT. Both are idempotent here
		// when their conflict clause is, but the prover cannot know it.
		r.conflict = "ON CONFLICT DO NOTHING"
		if keyed {
			r.conflict = []string{"ON CONFLICT (id) DO NOTHING", "ON CONFLICT (id) DO UPDATE SET qty = excluded.qty", ""}[sq.IntN(3)]
			if strings.Contains(r.conflict, "UPDATE") {
				r.mutable = []string{"qty"}
			}
		}
		if twoRows || sq.IntN(2) == 0 {
			r.with = "WITH w AS (SELECT 1) "
		} else {
			r.selectForm = true
		}
	}
	return r, true
}

// keyedDLQ returns, for some routes reading the file in consume mode, a
// dead-letter sink that is a SQLite table, and its artifact: keyed by the
// record's line (stable, never NULL), or by a payload field that a
// dead-lettered record may lack (NULL never conflicts), or without a key.
func (g *routeGen) keyedDLQ() (string, *Artifact) {
	dq := g.c.dq
	if dq == nil || g.c.Mode != "" || g.c.Broker != "" || g.c.tx != nil || g.c.srv != nil || dq.IntN(100) >= 25 {
		return "", nil
	}
	g.c.ruleDrawn = true
	db := fmt.Sprintf("out/%s.dlq.db", g.name)
	art := &Artifact{Kind: "table", Path: db, Table: "dlq", Group: g.name + "/dlq", Volatile: []string{"err"}, KeyedDLQ: true}
	key := []string{`${meta["mqb.src.line"]}`, `${meta["mqb.src.line"]}`, `${meta["mqb.src.line"]}`,
		// NULL for a line that is not an object (and for one without
		// a tag): the type test keeps [1,2,3] or 42 from failing the
		// dead-letter write, which would stop the route instead.
		`${type(payload) == "map" ? payload.seq : nil}`, `${type(payload) == "map" ? payload.tag : nil}`}[dq.IntN(5)]
	ddl := "CREATE TABLE IF NOT EXISTS dlq (k TEXT PRIMARY KEY, err TEXT)"
	query := fmt.Sprintf("INSERT INTO dlq (k, err) VALUES (%s, ${meta[\"mqb.error\"]})", key)
	switch dq.IntN(10) {
	case 0, 1, 2, 3, 4, 5:
		query += " ON CONFLICT (k) DO NOTHING"
	case 6:
		query += " ON CONFLICT (k) DO UPDATE SET err = excluded.err"
	case 7:
		query = strings.Replace(query, "INSERT INTO", "INSERT OR IGNORE INTO", 1)
	default:
		// No key: every write is a row of its own.
		ddl = "CREATE TABLE IF NOT EXISTS dlq (rid INTEGER PRIMARY KEY AUTOINCREMENT, k TEXT, err TEXT)"
		art.Volatile = append(art.Volatile, "rid")
	}
	return fmt.Sprintf("sql {\nurl = %q\ncreate_table = %q\ninsert_query = \"\"\"%s\"\"\"\n}", "sqlite://"+db, ddl, query), art
}

// dlqOnce reports whether a verdict's reasons call the route's dead-letter
// write effectively-once.
func dlqOnce(v Verdict) bool {
	return slices.ContainsFunc(v.Reasons, func(r string) bool { return strings.HasPrefix(r, "dlq: effectively-once") })
}

// unionSwitch is, for some routes, a switch on a per-delivery value (the
// clock, or the outcome of a request's call) whose branches are SQLite
// tables of different shapes keyed on one stable value; "" when not drawn
// (or when the route has no stable key for it).
func (g *routeGen) unionSwitch() string {
	un := g.c.un
	if un == nil || g.c.srv != nil || un.IntN(100) >= 10 {
		return ""
	}
	var key string
	switch {
	case !g.volatile["id"]:
		key = `${payload.id}`
	case g.idSet && !g.idVolatile:
		key = `${meta["mqb.id"]}`
	default:
		return ""
	}
	g.c.ruleDrawn = true
	group := fmt.Sprintf("%s/union%d", g.name, g.next())
	on, cases := `string(now().Nanosecond() % 2)`, []string{"0"}
	if un.IntN(3) == 0 {
		on, cases = `string(now().Nanosecond() % 3)`, []string{"0", "1"}
	}
	db := fmt.Sprintf("out/%s.db", g.name)
	leaf := func() string {
		table := fmt.Sprintf("t%d", g.next())
		keyed := un.IntN(4) != 0
		ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY, qty INTEGER, body TEXT)", table)
		if !keyed {
			ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (rid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, qty INTEGER, body TEXT)", table)
		}
		verb, conflict := "INSERT INTO", ""
		if keyed {
			switch un.IntN(5) {
			case 0, 1:
				conflict = "ON CONFLICT (id) DO NOTHING"
			case 2:
				conflict = "ON CONFLICT (id) DO UPDATE SET qty = excluded.qty, body = excluded.body"
			case 3:
				verb = "INSERT OR IGNORE INTO"
			default:
				verb = "INSERT OR REPLACE INTO"
			}
		} else if un.IntN(2) == 0 {
			conflict = "ON CONFLICT DO NOTHING"
		}
		q := fmt.Sprintf("%s %s (id, qty, body) VALUES (%s, ${payload.qty}, ${payload.body})", verb, table, key)
		if conflict != "" {
			q += " " + conflict
		}
		// Read back by key only; qty and body, which a DO UPDATE or a
		// REPLACE rewrites, are mutable.
		g.arts = append(g.arts, Artifact{Kind: "table", Path: db, Table: table, Group: group, KeyOnly: "id", Mutable: []string{"qty", "body"}})
		return fmt.Sprintf("sql {\nurl = %q\ncreate_table = %q\ninsert_query = \"\"\"%s\"\"\"\n}", "sqlite://"+db, ddl, q)
	}
	var call string
	if un.IntN(3) == 0 {
		// A switch on the outcome of the record's own call: a record the
		// call inserted before a kill finds it there on the replay and
		// takes another branch.
		table := fmt.Sprintf("t%d", g.next())
		call = fmt.Sprintf("sql {\nurl = %q\ncreate_table = %q\ninsert_query = \"\"\"INSERT INTO %s (id) VALUES (%s) ON CONFLICT (id) DO NOTHING\"\"\"\nreport_outcome = true\n}",
			"sqlite://"+db, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY)", table), table, key)
		g.arts = append(g.arts, Artifact{Kind: "table", Path: db, Table: table, Group: db + ":" + table, KeyOnly: "id"})
		on, cases = `meta["sql.outcome"]`, []string{"inserted"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "switch {\non = %s\n", on)
	for _, cv := range cases {
		fmt.Fprintf(&b, "case %q { to %s }\n", cv, leaf())
	}
	fmt.Fprintf(&b, "default { to %s }\n}", leaf())
	if call != "" {
		return fmt.Sprintf("request {\ncall %s\nforward %s\n}", call, b.String())
	}
	return b.String()
}
