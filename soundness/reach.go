package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// The shapes below reach effectively-once arguments of the prover that a
// -reasons tally over seeds 1 to 1500 never saw on an effectively-once
// route, or saw only once or twice:
//
//   - a switch on a stable value (payload.region) whose every branch is
//     idempotent: "switch case …: write: …" under effectively-once;
//   - a sql key built with the stability rules the older keys do not use:
//     let, ??, a conditional, and keys()/values() consumed by order-blind
//     builtins (sort, len, any);
//   - a keyed table with a second unique column that a DO UPDATE moves
//     (x = excluded.x), or leaves alone (x = x): which records that column
//     refuses depends on what the rows hold when each is written, so the
//     moving update is at-least-once (soundness found a replay landing a
//     record the clean run dead-lettered; see reach_soundness_test.go);
//   - a file handler writing parts named by source position ("handler:
//     file runs before the sink; its own write is idempotent").
//
// They draw from a stream of their own (Case.rch), so a seed that draws
// none of them generates what it did before; CI's fixed seeds (1 to 10)
// never draw them. A seed that draws one counts as drawing a rule shape
// (-rules checks it).

// reachShapes turns the shapes of this file on.
var reachShapes = true

// pickReachShapes gives c the stream of this file's shapes.
func pickReachShapes(c *Case) {
	if !reachShapes || c.Seed <= 10 {
		return
	}
	c.rch = rand.New(rand.NewPCG(c.Seed, 0x4eac))
}

// reachSink is, for some routes, a sink of this file's shapes instead of
// the one drawn; "" when not drawn (or when the route has no stable
// payload.id to key it on).
func (g *routeGen) reachSink() string {
	r := g.c.rch
	if r == nil || g.volatile["id"] || r.IntN(100) >= 18 {
		return ""
	}
	g.c.ruleDrawn = true
	switch k := r.IntN(10); {
	case k < 4:
		var b strings.Builder
		b.WriteString("switch {\non = payload.region\n")
		for _, cv := range []string{"eu", "us"} {
			fmt.Fprintf(&b, "case %q { to %s }\n", cv, g.reachLeaf(true))
		}
		if r.IntN(3) != 0 {
			fmt.Fprintf(&b, "default { to %s }\n", g.reachLeaf(true))
		}
		b.WriteString("}")
		return b.String()
	case k < 7:
		return g.otherUniqueLeaf()
	default:
		return g.reachLeaf(false)
	}
}

// reachHandler is, for some handlers, a file handler that writes parts
// named by source position (the handler's own write is then idempotent,
// and the records it skips on a replay must still reach the sink); ""
// when not drawn.
func (g *routeGen) reachHandler() string {
	r := g.c.rch
	if r == nil || r.IntN(100) >= 30 {
		return ""
	}
	g.c.ruleDrawn = true
	return "handle " + g.fileLeaf("", true) + "\n"
}

// reachKeys are keys on payload.id written with the stability rules the
// older keys do not use; each is the same on every replay of a record.
var reachKeys = []string{
	`${payload.id}`,
	`${payload.id ?? "none"}`,
	`${let k = string(payload.id); k + "-r"}`,
	`${join(sort(keys(payload)), ",") + "/" + string(payload.id)}`,
	`${string(len(values(payload))) + "/" + string(payload.id)}`,
	`${any(keys(payload), # == "tag") ? "t/" + string(payload.id) : string(payload.id)}`,
	`${string(fromPairs(map(sort(keys(payload)), [#, payload[#]])).id)}`,
}

// reachLeaf is a keyed SQLite table whose write absorbs a repeat (or, with
// parts, now and then positional parts): a branch the prover can call
// idempotent.
func (g *routeGen) reachLeaf(parts bool) string {
	r := g.c.rch
	if parts && r.IntN(5) == 0 {
		return g.fileLeaf("", true)
	}
	table := fmt.Sprintf("t%d", g.next())
	db := fmt.Sprintf("out/%s.db", g.name)
	key := reachKeys[r.IntN(len(reachKeys))]
	verb, conflict := "INSERT INTO", ""
	switch r.IntN(4) {
	case 0, 1:
		conflict = "ON CONFLICT (id) DO NOTHING"
	case 2:
		conflict = "ON CONFLICT (id) DO UPDATE SET qty = excluded.qty, body = excluded.body"
	default:
		verb = "INSERT OR IGNORE INTO"
	}
	art := Artifact{Kind: "table", Path: db, Table: table, Group: db + ":" + table, Mutable: []string{"qty", "body"},
		FirstWins: g.reorders() && !strings.Contains(conflict, "UPDATE")}
	g.arts = append(g.arts, art)
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY, qty INTEGER, body TEXT)", table)
	q := fmt.Sprintf("%s %s (id, qty, body) VALUES (%s, ${payload.qty}, ${payload.body})", verb, table, key)
	if conflict != "" {
		q += " " + conflict
	}
	return fmt.Sprintf("sql {\nurl = %q\ncreate_table = %q\ninsert_query = \"\"\"%s\"\"\"\n}", "sqlite://"+db, ddl, q)
}

// otherUniqueLeaf is a table keyed on id with a second unique column x,
// bound to payload.tag (five values, and NULL for a record without one),
// written by a DO UPDATE that moves x or leaves it alone.
func (g *routeGen) otherUniqueLeaf() string {
	r := g.c.rch
	table := fmt.Sprintf("t%d", g.next())
	db := fmt.Sprintf("out/%s.db", g.name)
	set := []string{"qty = excluded.qty, x = excluded.x", "qty = excluded.qty, x = excluded.x", "qty = excluded.qty, x = x", "x = excluded.x"}[r.IntN(4)]
	// Which of a key's records x refuses (dead-letters) depends on what
	// the rows hold when each is written, so a record the clean run wrote
	// may be dead-lettered on a replay, or under concurrency > 1 in
	// another order (seeds 2132 and 2204): like a record that changed
	// branches, it is not lost, and at-least-once does not demand the
	// clean run's rows here (AnyBranch); effectively-once still does. The
	// other way round, a record the clean run dead-lettered for x may
	// apply on a replay as an update of a row a later record of its id
	// inserted (seed 26067): OtherUnique lets the checker explain that.
	g.arts = append(g.arts, Artifact{Kind: "table", Path: db, Table: table, Group: db + ":" + table, Mutable: []string{"qty", "x"}, AnyBranch: true,
		OtherUnique: &OtherUnique{Column: "x", Key: "id", KeyField: "id"}})
	ddl := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY, qty INTEGER, x TEXT UNIQUE)", table)
	q := fmt.Sprintf("INSERT INTO %s (id, qty, x) VALUES (${payload.id}, ${payload.qty}, ${payload.tag}) ON CONFLICT (id) DO UPDATE SET %s", table, set)
	return fmt.Sprintf("sql {\nurl = %q\ncreate_table = %q\ninsert_query = \"\"\"%s\"\"\"\n}", "sqlite://"+db, ddl, q)
}
