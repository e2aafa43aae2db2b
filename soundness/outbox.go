package main

import (
	"fmt"
	"math/rand/v2"
)

// The transactional outbox (connector/sql/outbox.go): a route reading the
// sql cursor source whose sql sink writes into the same database (the url
// written alike) at concurrency 1 and without a handler commits the source
// position in the sink's own transaction, table mqb_outbox, and the
// compiler calls it exactly-once, even for a plain INSERT into a table
// without a unique key. The generator never wrote such a sink: its sql
// sinks are SQLite files or a database of their own (@POSTGRES@), never
// the source's.
//
// outboxSink draws, for some routes of a case reading the sql source, a
// sink on the source's database (pgSourcePlaceholder is where the harness
// reads it back): a plain INSERT into a table without a key (each row
// exactly once), or into a keyed table (a repeated id fails as a
// constraint error and goes to the dlq; which records do is the input's,
// not the timing's), or a DO NOTHING. Concurrent routes and routes with a
// handler are drawn too: the outbox is off there, and the verdict must
// fall back to the conflict clause's.
//
// The draws come from a stream of their own (Case.obx), so a seed that
// draws none generates what it did before; a seed that draws one counts
// as drawing a rule shape (-rules checks it).

// pgSourcePlaceholder names, as an Artifact's Path, the database the sql
// source reads (startPGTable registers it for the run directory).
const pgSourcePlaceholder = "@PGSOURCE@"

// outboxShapes turns the shapes of this file on.
var outboxShapes = true

// pickOutbox gives a case that reads the sql source its outbox stream.
func pickOutbox(c *Case) {
	if !outboxShapes || c.Broker != brokerSQL || c.Seed <= 10 {
		return
	}
	c.obx = rand.New(rand.NewPCG(c.Seed, 0x0b0c))
}

// outboxSink is, for some routes, a sql sink on the source's database; ""
// when not drawn.
func (g *routeGen) outboxSink() string {
	r := g.c.obx
	if r == nil || r.IntN(100) >= 60 {
		return ""
	}
	g.c.ruleDrawn = true
	table := fmt.Sprintf("%s_o%d", g.name, g.next())
	art := Artifact{Kind: "table", Path: pgSourcePlaceholder, Table: table, Group: pgSourcePlaceholder + ":" + table}
	keyVol := g.volatile["id"]
	var ddl, query string
	cols := "id, qty, body, x"
	x := `${payload.tag}`
	if r.IntN(4) == 0 {
		// A per-delivery column: still one row per record.
		x = `${message_id}`
		art.Volatile = append(art.Volatile, "x")
	} else if g.volatile["tag"] {
		art.Volatile = append(art.Volatile, "x")
	}
	if g.volatile["qty"] {
		art.Volatile = append(art.Volatile, "qty")
	}
	vals := fmt.Sprintf("(${payload.id}, ${payload.qty}, ${payload.body}, %s)", x)
	switch k := r.IntN(10); {
	case k < 5:
		// No key: the row id counts inserts (a sequence does not roll back
		// with a transaction), the rest is one row per record.
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (rid BIGSERIAL PRIMARY KEY, id TEXT, qty BIGINT, body TEXT, x TEXT)", table)
		query = fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", table, cols, vals)
		art.Volatile = append(art.Volatile, "rid")
		if keyVol {
			art.Volatile = append(art.Volatile, "id")
		}
	case k < 8 && !g.reorders():
		// Keyed, plain INSERT: a repeated id is a constraint error (to the
		// dlq), a record without one a NOT NULL error. Only where a key's
		// records reach the table in read order: otherwise which of them
		// lands and which are dead-lettered is the order the sink workers
		// apply them, in a clean run too (seed 14284), and two workers
		// inserting the same keys in other orders deadlock (seed 16275).
		// Such a route draws the DO NOTHING table below instead.
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY, qty BIGINT, body TEXT, x TEXT)", table)
		query = fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", table, cols, vals)
		if keyVol {
			art.Volatile = append(art.Volatile, "id")
		}
	default:
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id TEXT PRIMARY KEY, qty BIGINT, body TEXT, x TEXT)", table)
		query = fmt.Sprintf("INSERT INTO %s (%s) VALUES %s ON CONFLICT (id) DO NOTHING", table, cols, vals)
		if keyVol {
			art.Volatile = append(art.Volatile, "id")
		} else {
			art.Mutable = []string{"qty", "body", "x"}
			art.FirstWins = g.reorders()
		}
	}
	g.arts = append(g.arts, art)
	return fmt.Sprintf("sql {\nurl = \"${env(\\\"%s\\\")}\"\ncreate_table = %q\ninsert_query = \"\"\"%s\"\"\"\n}", pgURLEnv, ddl, query)
}
