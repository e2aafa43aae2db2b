package main

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"

	_ "github.com/ClickHouse/clickhouse-go/v2" // the "clickhouse" database/sql driver

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// ClickHouse sinks. The prover calls a route into ClickHouse
// effectively-once when its table is a ReplacingMergeTree whose sorting
// key only columns bound to stable values fill (a premise checked at
// start-up), and then only when read with FINAL: repeats collapse at merge
// time. The generator draws, from a stream of the case's own (ch, so a
// seed that does not draw them keeps its routes exactly as before), some
// of a route's sinks as clickhouse sinks of the shapes the prover tells
// apart:
//
//   - the engine: ReplacingMergeTree with a version column (and a version
//     expression, stable or per-delivery, or none), without one, or a
//     plain MergeTree (a route planned effectively-once into it must be
//     refused at start-up; one planned at-least-once duplicates and must
//     lose nothing);
//   - the sorting key: the id column alone, or with a column a
//     per-delivery value, a stable one or nothing fills (the last two
//     refused at start-up when not among the stable columns), an empty
//     one, and sometimes a partition key;
//   - the values: a columns block binding the key to meta["mqb.id"] (an
//     id step's or the source's), payload.id, the source line, or
//     message_id and now() (per-delivery), or no block at all, so the
//     payload's top-level fields fill the table's columns (a map step the
//     route drew may have replaced one of them);
//   - whatever concurrency the route drew.
//
// Each run directory gets a database of its own (the chPlaceholder in a
// url is replaced by it), created when the directory is prepared and
// dropped when the case ends; a table is read back with FINAL when its
// engine collapses rows, and as it is otherwise.

const chPlaceholder = "@CLICKHOUSE@"

// clickhouseSinks turns the clickhouse sinks on (the -clickhouse flag,
// and TestClickHouseSinks); off, no seed draws them.
var clickhouseSinks bool

// pickClickHouse gives the case its stream of clickhouse draws when they
// are on. CI's fixed seeds (1 to 10) stay as they were.
func pickClickHouse(c *Case) {
	if !clickhouseSinks || c.Seed <= 10 {
		return
	}
	c.ch = rand.New(rand.NewPCG(c.Seed, 0xc1c4))
}

// clickhouseLeaf returns a clickhouse sink in place of the sink sink()
// would draw, or "" (about half the time, and always in the branches of a
// per-delivery switch, which are built alike from one stream).
func (g *routeGen) clickhouseLeaf(group string) string {
	ch := g.c.ch
	if ch == nil || group != "" || ch.IntN(100) >= 50 {
		return ""
	}
	pick := func(options ...string) string { return options[ch.IntN(len(options))] }
	table := fmt.Sprintf("%s_ch%d", g.name, g.next())
	art := Artifact{Kind: "table", Path: chPlaceholder, Table: table, Group: chPlaceholder + ":" + table}

	// The engine.
	var engine string
	versioned := false
	switch r := ch.IntN(100); {
	case r < 45:
		engine, versioned = "ReplacingMergeTree(ver)", true
	case r < 88:
		engine = "ReplacingMergeTree"
	default:
		engine = "MergeTree"
	}
	replacing := engine != "MergeTree"

	type val struct {
		expr     string
		volatile bool
	}
	var defs, sortCols []string
	var b strings.Builder
	fmt.Fprintf(&b, "clickhouse {\nurl = %q\ntable = %q\n", chPlaceholder, table)
	if ch.IntN(100) < 60 {
		// A columns block.
		defs = []string{"id String", "qty Int64", "body String", "x String", "ver UInt64"}
		// A per-delivery key is refused at start-up (with the route's
		// other routes) when the verdict rests on the premise: drawn
		// less often than the stable ones.
		idOpts := []val{
			{`payload.id`, g.volatile["id"]},
			{`payload.id`, g.volatile["id"]},
			{pick(`message_id`, `string(now().UnixNano())`), true},
		}
		if g.idSet {
			idOpts = append(idOpts, val{`meta["mqb.id"]`, g.idVolatile}, val{`meta["mqb.id"]`, g.idVolatile}, val{`meta["mqb.id"]`, g.idVolatile})
		}
		if g.c.Broker == "" {
			// The file source's line: a source position.
			idOpts = append(idOpts, val{`meta["mqb.src.line"]`, false}, val{`meta["mqb.src.line"]`, false})
		}
		xOpts := []val{{`payload.region`, g.volatile["region"]}, {`message_id`, true}, {`string(now().UnixNano())`, true}, {`"const"`, false}}
		if g.volatile["stamp"] {
			xOpts = append(xOpts, val{`payload.stamp`, true})
		}
		cols := map[string]val{"id": idOpts[ch.IntN(len(idOpts))]}
		if ch.IntN(100) < 80 {
			cols["qty"] = val{`payload.qty`, false}
		}
		if ch.IntN(100) < 50 {
			cols["body"] = val{`payload.body`, false}
		}
		if ch.IntN(100) < 60 {
			cols["x"] = xOpts[ch.IntN(len(xOpts))]
		}
		b.WriteString("columns {\n")
		for _, c := range []string{"id", "qty", "body", "x"} {
			if v, ok := cols[c]; ok {
				fmt.Fprintf(&b, "%s = %s\n", c, v.expr)
				if v.volatile {
					art.Volatile = append(art.Volatile, c)
				}
			}
		}
		b.WriteString("}\n")
		switch r := ch.IntN(100); {
		case r < 65:
			sortCols = []string{"id"}
		case r < 80:
			sortCols = []string{"id", "x"}
		case r < 90:
			sortCols = []string{"id", "qty"}
		case r < 95:
			sortCols = []string{"qty", "id"}
		default:
			sortCols = []string{"id", "body"}
		}
	} else {
		// The payload's top-level fields; ver is left to its DEFAULT.
		defs = []string{"id String", "seq Int64", "qty Int64", "region String", "body String", "tag Nullable(String)", "stamp Nullable(String)", "ver UInt64 DEFAULT 0"}
		for _, f := range g.volatileFields() {
			if slices.Contains([]string{"id", "seq", "qty", "region", "body", "tag", "stamp"}, f) {
				art.Volatile = append(art.Volatile, f)
			}
		}
		switch r := ch.IntN(100); {
		case r < 65:
			sortCols = []string{"id"}
		case r < 80:
			sortCols = []string{"id", "region"}
		case r < 90:
			sortCols = []string{"region", "id"}
		case r < 95:
			sortCols = []string{"id", "seq"}
		default:
			// A column the server fills: not among the written ones.
			defs = append(defs, "filled String DEFAULT toString(rand())")
			sortCols = []string{"id", "filled"}
			// rand() on every insert: two clean runs differ on it (seed
			// 18040), so it compares as "*".
			art.Volatile = append(art.Volatile, "filled")
		}
	}
	orderBy := "(" + strings.Join(sortCols, ", ") + ")"
	if ch.IntN(100) < 3 {
		orderBy, sortCols = "tuple()", nil
	}
	partition := ""
	if ch.IntN(100) < 12 {
		partition = " PARTITION BY " + pick("id", "length(id) % 3")
	}

	// The version.
	if versioned && ch.IntN(100) < 70 {
		vOpts := []val{{`payload.seq`, false}, {`payload.qty`, false}, {`now().UnixNano()`, true}}
		if g.c.Broker == "" {
			vOpts = append(vOpts, val{`meta["mqb.src.line"]`, false})
		}
		v := vOpts[ch.IntN(len(vOpts))]
		fmt.Fprintf(&b, "version = %s\n", v.expr)
		if v.volatile {
			art.Volatile = append(art.Volatile, "ver")
		}
		if v.expr == `payload.qty` && g.reorders() {
			// Records of one key with one qty land in the order the sink
			// workers apply them, in a clean run too, or in the order a
			// source without a replayable position redelivers them:
			// which of them is kept is not the verdict's to say.
			art.FirstWins = true
		}
	}
	if replacing {
		// Which record of a key is kept can change with the order replays
		// reach the table: the loss check asks for the sorting key only.
		for _, d := range defs {
			c, _, _ := strings.Cut(d, " ")
			if !slices.Contains(sortCols, c) {
				art.Mutable = append(art.Mutable, c)
			}
		}
		// An empty sorting key (tuple()) leaves every column mutable: the
		// table collapses to one row, the last write's, and the loss check
		// asks only that there is one (seed 499 of the first -clickhouse
		// hunt, at-least-once, was reported for another last row).
	}
	b.WriteString("}")
	ddl := fmt.Sprintf("CREATE TABLE %s (%s) ENGINE = %s%s ORDER BY %s", table, strings.Join(defs, ", "), engine, partition, orderBy)
	g.c.Setup = append(g.c.Setup, SetupSQL{DB: chPlaceholder, SQL: ddl})
	g.arts = append(g.arts, art)
	return b.String()
}

// newClickHouseDB creates a database on the shared ClickHouse server.
func newClickHouseDB(tb *harnessTB) (testsrv.Database, string) {
	db := testsrv.SharedClickHouse(tb).NewDatabase(tb)
	// The database/sql form of clickhouse-go: timeouts on every request,
	// since the old server never answers one it does not understand.
	dsn := (&url.URL{Scheme: "clickhouse", User: url.User("default"), Host: db.DSN, Path: "/" + db.Name,
		RawQuery: "dial_timeout=10s&read_timeout=60s"}).String()
	db.DSN = dsn
	return db, "clickhouse"
}

// openClickHouseTable says how to read a table of a run directory's
// ClickHouse database: with FINAL when its engine collapses rows (the
// reading the verdict promises for), as it is otherwise; ok is false
// when there is no such table.
func openClickHouseTable(h *sql.DB, a Artifact) (query string, ok bool, err error) {
	var engine string
	err = h.QueryRow(`SELECT engine FROM system.tables WHERE database = currentDatabase() AND name = ?`, a.Table).Scan(&engine)
	if err == sql.ErrNoRows {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	q := "SELECT * FROM `" + a.Table + "`"
	if strings.HasSuffix(engine, "ReplacingMergeTree") {
		q += " FINAL"
	}
	return q, true, nil
}
