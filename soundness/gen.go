package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/lang"
)

// Case is one generated (or recorded) pipeline file with its input: what the
// checker runs, and what it needs to read the sinks back.
type Case struct {
	Name string `json:"name"`
	Seed uint64 `json:"seed"`
	// Kills is how many SIGKILLs the killed run should land.
	Kills int `json:"kills"`
	// Mode is the file source's mode: consume (empty), group_subscribe or
	// subscribe (the input is then appended while the routes run).
	Mode string `json:"mode,omitempty"`
	// Broker names where the routes read the input instead of the file:
	// "nats" (a NATS JetStream stream, filled before the first run),
	// "nats-core" (a core NATS subject, published to while the routes
	// run), "kafka" (a topic of the in-process Kafka-protocol broker) or
	// "sql" (a PostgreSQL table read by the sql cursor source); the last
	// three are fed in chunks while the routes run and while they are
	// down (see sources.go). MsgIDs stamps each message with a producer
	// id (Nats-Msg-Id, or Kafka's mq_bridge.message_id header).
	Broker string `json:"broker,omitempty"`
	MsgIDs bool   `json:"msg_ids,omitempty"`
	// Partitions of the Kafka topic (1 when unset): with more than one,
	// messages are keyed by the record's id, so one id keeps its order.
	Partitions int `json:"partitions,omitempty"`
	// Source is the formatted .mqb file (routes.mqb), Input its data
	// (in.jsonl).
	Source string `json:"-"`
	Input  string `json:"-"`
	// Setup are statements run on SQLite databases before each run: the
	// tables a route writes without a create_table of its own.
	Setup  []SetupSQL   `json:"setup,omitempty"`
	Routes []RouteShape `json:"routes"`

	// srcRng draws the per-route choices of the sources added later
	// (kafka, sql, core NATS), so that they changed no other seed.
	srcRng *rand.Rand
	// aux draws the choices added after the first cases were recorded,
	// from a stream of its own, so that adding them changed no seed's
	// other choices.
	aux *rand.Rand
	// partDirs are the part directories of the routes generated so far.
	partDirs []string
	// ext draws the shapes added after the dedup elision and map paths
	// landed (see shapes.go), from a stream of its own.
	ext *rand.Rand
	// tx draws the unnest and parse shapes (see transforms.go); nil when
	// the case has none. textForm is the dialect some of its lines are in.
	tx       *rand.Rand
	textForm string
	// srv draws which sql sinks are on PostgreSQL or MariaDB, and their
	// dialect's forms (see sqlservers.go); nil when the case has none.
	srv *rand.Rand
	// dsrv draws which dedup stores are on PostgreSQL or MariaDB (see
	// sqlservers.go); nil when the case has no server sinks.
	dsrv *rand.Rand
	// ch draws the clickhouse sinks (see clickhouse.go); nil when none.
	ch *rand.Rand
	// sq, dq and un draw the shapes of rules.go (a sql write the prover
	// must refuse, a keyed dead-letter table, a switch compared by the
	// union of its tables' keys); nil when the case has none.
	sq, dq, un *rand.Rand
	ruleDrawn  bool
	// rch draws the shapes of reach.go; nil when the case has none.
	rch *rand.Rand
	// obx draws the sinks of outbox.go, envx the keys of envkeys.go, obj
	// the sinks of objstore.go; nil when the case has none.
	obx, envx, obj *rand.Rand
	// mgs draws the mongodb sinks of mongosink.go; nil when none.
	// mongoDrawn: some route of the case has one.
	mgs        *rand.Rand
	mongoDrawn bool
}

// SetupSQL is one statement run on a database file before the route runs.
type SetupSQL struct {
	DB  string `json:"db"`
	SQL string `json:"sql"`
}

// RouteShape is what the checker knows about one route of a case.
type RouteShape struct {
	Name string `json:"name"`
	// Source is the route alone, formatted: the isolation check runs it
	// without the file's other routes.
	Source    string     `json:"source"`
	Artifacts []Artifact `json:"artifacts"`
	// Timed is set when the route's clean outcome depends on timing or
	// randomness by construction (a per-delivery filter, a short dedup
	// ttl): two clean runs may differ, so a difference is confirmed
	// against a second clean run before it counts.
	Timed bool `json:"timed,omitempty"`
	// Override, when set, replaces the compiler's verdict for this route:
	// the harness's own test uses it to plant a false verdict.
	Override string `json:"override,omitempty"`
	// OverrideDLQ, when set, makes the verdict call the route's
	// dead-letter write effectively-once, whatever the compiler said.
	OverrideDLQ bool `json:"override_dlq,omitempty"`
}

// Artifact is one thing a route writes that the checker reads back.
type Artifact struct {
	// Kind is "table" (SQLite rows), "parts" (a directory of part files),
	// "lines" (one appended file), "dlq" (a dead-letter file: its
	// record positions are compared) or "mongo" (a MongoDB collection,
	// Table, of the database Path stands for: see mongosink.go).
	Kind  string `json:"kind"`
	Path  string `json:"path"`
	Table string `json:"table,omitempty"`
	// Group names the multiset the artifact's records are counted in:
	// the branches of a switch on a per-delivery value share one, so a
	// record may land in either branch but not in both.
	Group string `json:"group"`
	// Volatile columns (or JSON fields) hold per-delivery values by
	// design (now(), message_id, random()): compared as "*".
	Volatile []string `json:"volatile,omitempty"`
	// Mutable columns are rewritten by a conflict's DO UPDATE: left out of
	// the at-least-once loss check, which asks only whether every row of
	// the clean run is there.
	Mutable []string `json:"mutable,omitempty"`
	// AnyBranch: the artifact is under a switch on the request's outcome
	// (per-delivery: a call that inserted before a kill reports "existed"
	// on the replay), whose branches are sinks of different shapes. A
	// replayed record may leave its clean run's branch for another one,
	// where the loss check cannot follow it, so at-least-once does not
	// demand the clean run's records here; effectively-once still demands
	// exactly the clean run's.
	AnyBranch bool `json:"any_branch,omitempty"`
	// ByContent compares a dead-letter file by its records, not their
	// positions: a file source in a follow mode, and a NATS source, number
	// records from 0 again on every start.
	ByContent bool `json:"by_content,omitempty"`
	// FirstWins: a keyed table whose conflict keeps the row already there
	// (ON CONFLICT DO NOTHING, INSERT OR IGNORE) in a route of
	// concurrency > 1. Which of a key's records wrote the row is the
	// order the sink workers applied them, in a clean run too: the table
	// is compared by key (the columns Mutable lists left out).
	FirstWins bool `json:"first_wins,omitempty"`
	// KeyedDLQ: the table is the route's dead-letter sink. Like a
	// dead-letter file it is compared as a set, unless the verdict calls
	// the dead-letter write effectively-once (on an effectively-once
	// route): then its rows are compared as a multiset.
	KeyedDLQ bool `json:"keyed_dlq,omitempty"`
	// KeyOnly names the one column a table is read back by (rows where it
	// is NULL left out): the branches of a switch on a per-delivery value
	// are tables of different shapes, and what they must hold together is
	// every record's key, whichever branch took it.
	KeyOnly string `json:"key_only,omitempty"`
	// OtherUnique, on a keyed table, names a unique column other than the
	// conflict target: whether the table refuses a record for it depends
	// on the rows the table holds when the record is written, so on a
	// replay a record the clean run dead-lettered may apply as an update
	// (explainDLQ).
	OtherUnique *OtherUnique `json:"other_unique,omitempty"`
}

// OtherUnique is a table's second unique column, and the conflict
// target's column with the payload field bound to it.
type OtherUnique struct {
	// Column is the second unique column (x); Key the conflict target's
	// column (id), bound to the payload field KeyField.
	Column   string `json:"column"`
	Key      string `json:"key"`
	KeyField string `json:"key_field"`
}

// generate builds the case of one seed.
func generate(seed uint64, kills int) (*Case, error) { return generateFrom(seed, kills, "") }

// generateFrom builds the case of one seed, reading the source force (one
// of moreKinds) when it is set.
func generateFrom(seed uint64, kills int, force string) (*Case, error) {
	rng := rand.New(rand.NewPCG(seed, 0x50a4d))
	c := &Case{Name: fmt.Sprintf("seed-%d", seed), Seed: seed, Kills: kills, aux: rand.New(rand.NewPCG(seed, 0xa0c)),
		ext: rand.New(rand.NewPCG(seed, 0xe1d))}
	c.Input = genData(rng, 300+rng.IntN(1200))
	// The mode comes from a stream of its own, so adding it left every
	// seed's routes as they were.
	switch r := rand.New(rand.NewPCG(seed, 0x30de)).IntN(100); {
	case r < 10:
		c.Mode = "group_subscribe"
	case r < 15:
		c.Mode = "subscribe"
	}
	if c.Mode == "" {
		b := rand.New(rand.NewPCG(seed, 0x7a75))
		if b.IntN(100) < 12 {
			c.Broker, c.MsgIDs = "nats", b.IntN(2) == 0
		}
	}
	pickSource(c)
	if force != "" {
		// One of the sources of more.go, whatever the seed drew.
		c.Mode, c.Broker, c.MsgIDs, c.Partitions = "", force, false, 0
		c.Name = fmt.Sprintf("%s-seed-%d", force, seed)
		c.srcRng = rand.New(rand.NewPCG(seed, 0x5a1d))
	} else {
		pickMore(c)
		pickTransforms(c)
	}
	pickServerSinks(c)
	pickClickHouse(c)
	pickRuleShapes(c)
	pickReachShapes(c)
	pickOutbox(c)
	pickEnvKeys(c)
	pickObjectStores(c)
	pickMongoSinks(c)
	nRoutes := 1
	switch r := rng.IntN(10); {
	case r >= 9:
		nRoutes = 3
	case r >= 6:
		nRoutes = 2
	}
	var src strings.Builder
	for i := range nRoutes {
		g := &routeGen{rng: rng, name: fmt.Sprintf("route_%c", 'a'+i), volatile: map[string]bool{}, c: c}
		text := g.route()
		formatted, err := formatMQB(text)
		if err != nil {
			return nil, fmt.Errorf("seed %d: generated an unparsable route: %v\n%s", seed, err, text)
		}
		src.WriteString(text)
		src.WriteString("\n")
		c.Routes = append(c.Routes, RouteShape{Name: g.name, Source: formatted, Artifacts: g.arts, Timed: g.timed})
	}
	shareVolatile(c.Routes)
	if c.mongoDrawn {
		c.Input = mongoSafeInput(c.Input)
	}
	formatted, err := formatMQB(src.String())
	if err != nil {
		return nil, fmt.Errorf("seed %d: generated an unparsable file: %v\n%s", seed, err, src.String())
	}
	c.Source = formatted
	return c, nil
}

// shareVolatile gives every file artifact that several routes write (a
// part directory another route's handler or sink also names) the union of
// their volatile fields: each route's snapshot of it holds the other
// routes' records too, whose per-delivery fields its own route never set.
// The artifacts of one comparison group (the branches of a per-delivery
// switch) keep one list, so the union spreads to them as well.
func shareVolatile(routes []RouteShape) {
	file := func(a Artifact) bool { return a.Kind == "parts" || a.Kind == "lines" }
	for changed := true; changed; {
		changed = false
		byPath, byGroup := map[string][]string{}, map[string][]string{}
		for _, r := range routes {
			for _, a := range r.Artifacts {
				if file(a) {
					byPath[a.Path] = append(byPath[a.Path], a.Volatile...)
					byGroup[r.Name+"\x00"+a.Group] = append(byGroup[r.Name+"\x00"+a.Group], a.Volatile...)
				}
			}
		}
		for _, r := range routes {
			for i, a := range r.Artifacts {
				if !file(a) {
					continue
				}
				f := append(slices.Clone(byPath[a.Path]), byGroup[r.Name+"\x00"+a.Group]...)
				slices.Sort(f)
				if f = slices.Compact(f); len(f) != len(a.Volatile) {
					r.Artifacts[i].Volatile, changed = f, true
				}
			}
		}
	}
}

// formatMQB prints a file the way `mqbc fmt` does.
func formatMQB(src string) (string, error) {
	out, diags := lang.Format("routes.mqb", []byte(src))
	if diags.HasErrors() {
		var msgs []string
		for _, d := range diags {
			msgs = append(msgs, d.Summary)
		}
		return "", fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return string(out), nil
}

// routeGen generates one route, tracking what the harness must know to
// compare its sinks: which payload fields and which identity hold
// per-delivery values.
type routeGen struct {
	rng  *rand.Rand
	c    *Case
	name string
	n    int
	// concurrent: the route has concurrency > 1.
	concurrent bool
	// idSet: an id step ran; idVolatile: its value is per-delivery.
	idSet, idVolatile bool
	// volatile payload fields (set by map from a per-delivery value).
	volatile map[string]bool
	arts     []Artifact
	timed    bool
	// outcome is the meta key a report_outcome handler sets, if any.
	outcome string
	// handled: the route has a handle step.
	handled bool
	// deduped: a dedup step ran (an unnest after it is E060).
	deduped bool
	// forced, while set, makes sqlLeaf write the sink a dedup elision
	// needs (see elidableTail).
	forced *elidable
	// ownID: the payload carries the captured document's _id (the
	// mongodb source), which a mongodb sink keeps only with id_field
	// "_id" (see mongoSink); a map that replaces the payload drops it.
	ownID bool
}

// reorders reports whether a key's records can reach the route's sinks in
// another order than they were read, in a clean run or on a replay: under
// concurrency > 1 the sink workers apply them in any order, and a source
// without a replayable position redelivers what a kill left unacknowledged
// on its own schedule, after newer records (JetStream after ack_wait,
// RabbitMQ and an MQTT session on reconnect). Which record of a key a
// first-wins write (DO NOTHING, INSERT OR IGNORE) keeps is then not the
// verdict's to say.
func (g *routeGen) reorders() bool {
	return g.concurrent || g.c.redeliversOutOfOrder()
}

// redeliversOutOfOrder reports whether the case's source can deliver a
// record again after newer ones (see routeGen.reorders).
func (c *Case) redeliversOutOfOrder() bool {
	switch c.Broker {
	case brokerNATS, brokerAMQP, brokerMQTT:
		return true
	}
	return false
}

func (g *routeGen) pick(options ...string) string { return options[g.rng.IntN(len(options))] }
func (g *routeGen) chance(pct int) bool           { return g.rng.IntN(100) < pct }

func (g *routeGen) next() int { g.n++; return g.n }

func (g *routeGen) volatileFields() []string {
	var out []string
	for f, v := range g.volatile {
		if v {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

func (g *routeGen) route() string {
	var b strings.Builder
	fmt.Fprintf(&b, "route %s {\n", g.name)
	fmt.Fprintf(&b, "batch_size = %s\n", g.pick("1", "4", "16", "16", "64"))
	if g.chance(25) {
		c := g.pick("2", "4")
		g.concurrent = true
		fmt.Fprintf(&b, "concurrency = %s\n", c)
	}
	unnestLate := false
	if g.c.tx != nil {
		from, parse := g.fromFile()
		b.WriteString(from + parse)
		unnestLate = g.c.tx.IntN(2) == 0
		if !unnestLate {
			b.WriteString(g.unnestStep())
		}
	} else if from := g.c.fromBlock(g.name); from != "" {
		fmt.Fprintf(&b, "from %s\n", from)
		if g.ownID = g.c.Broker == brokerMongo; g.ownID {
			b.WriteString(g.unwrapMongoID())
		}
	} else if g.c.Mode != "" {
		fmt.Fprintf(&b, "from file { path = \"in.jsonl\", mode = %s }\n", g.c.Mode)
	} else {
		b.WriteString("from file { path = \"in.jsonl\" }\n")
	}
	for range g.rng.IntN(4) {
		b.WriteString(g.inputStep())
	}
	if unnestLate {
		b.WriteString(g.unnestStep())
	}
	if g.chance(20) {
		b.WriteString(g.handler())
		for range g.rng.IntN(3) {
			b.WriteString(g.outputStep())
		}
		g.handled = true
	}
	elide := g.elidableTail()
	if elide != nil {
		b.WriteString(elide.dedup)
	}
	// Every route has a dlq: the data holds malformed lines, and a route
	// without one stops at the first (exit 1, nothing committed past it),
	// which cmd/mqbc's TestFailedRecordWithoutDLQIsNotLost checks. The
	// draw that once decided it stays, so a seed still makes its route.
	_ = g.chance(75)
	if to, art := g.keyedDLQ(); art != nil {
		g.arts = append(g.arts, *art)
		fmt.Fprintf(&b, "dlq { to %s }\n", to)
	} else {
		dlq := fmt.Sprintf("out/%s.dlq.jsonl", g.name)
		g.arts = append(g.arts, Artifact{Kind: "dlq", Path: dlq, Group: g.name + "/dlq",
			ByContent: g.c.Mode != "" || g.c.Broker != "", Volatile: g.volatileFields()})
		fmt.Fprintf(&b, "dlq { to file { path = %q } }\n", dlq)
	}
	if elide != nil {
		g.forced = elide
		fmt.Fprintf(&b, "to %s\n}\n", g.sqlLeaf("", false))
		g.forced = nil
	} else {
		arts, setup, parts := len(g.arts), len(g.c.Setup), len(g.c.partDirs)
		to := g.sink(0, "")
		drawnArts, drawnParts := len(g.arts), len(g.c.partDirs)
		u := g.unionSwitch()
		if u == "" {
			u = g.reachSink()
		}
		if u == "" {
			u = g.outboxSink()
		}
		if u != "" {
			// The sink drawn is left out (its draws stay made, so the
			// routes after this one are as they were); what the new one
			// writes is kept (it once went with the sink drawn, so no
			// union switch's tables were compared).
			g.arts = append(g.arts[:arts], g.arts[drawnArts:]...)
			g.c.partDirs = append(g.c.partDirs[:parts], g.c.partDirs[drawnParts:]...)
			g.c.Setup = g.c.Setup[:setup]
			to = u
		}
		fmt.Fprintf(&b, "to %s\n}\n", to)
	}
	return b.String()
}

// inputStep is an id, dedup, filter or map step.
func (g *routeGen) inputStep() string {
	switch g.rng.IntN(4) {
	case 0:
		return g.idStep()
	case 1:
		key := g.pick(`payload.id`, `message_id`, `payload.id + "/" + payload.region`)
		if g.idSet && g.chance(60) {
			key = `meta["mqb.id"]`
		}
		if e := g.envKey(10); e != "" {
			key = e
		}
		ttl := "1h"
		if g.chance(15) {
			ttl = "1s"
		}
		if ttl == "1s" {
			// Whether a repeat is dropped depends on how long ago its
			// first copy was seen.
			g.timed = true
		}
		store := ""
		if g.chance(40) {
			store = fmt.Sprintf(", store = %q", "pebble://state/dedup_"+g.name)
		}
		if ph := g.c.dedupServer(); ph != "" {
			store = fmt.Sprintf(", store = %q", ph)
		}
		g.deduped = true
		return fmt.Sprintf("dedup { key = %s, ttl = %s%s }\n", key, ttl, store)
	case 2:
		return "filter " + g.filterExpr() + "\n"
	default:
		return g.mapStep()
	}
}

func (g *routeGen) idStep() string {
	type idExpr struct {
		expr     string
		volatile bool
	}
	fieldVol := g.volatile["id"]
	opts := []idExpr{
		{`payload.id`, fieldVol},
		{`"ord-${payload.id}"`, fieldVol},
		{`"${payload.id}-${payload.tag}"`, fieldVol || g.volatile["tag"]},
		{`string(payload.id) + "-" + payload.region`, fieldVol || g.volatile["region"]},
		{`message_id`, true},
		{`string(now().UnixNano())`, true},
	}
	e := opts[g.rng.IntN(len(opts))]
	if k := g.envKey(10); k != "" {
		e = idExpr{k, fieldVol}
	}
	g.idSet, g.idVolatile = true, e.volatile
	return "id " + e.expr + "\n"
}

func (g *routeGen) filterExpr() string {
	switch g.rng.IntN(20) {
	case 0:
		// Per-delivery, and it really decides differently each time.
		g.timed = true
		return `now().Nanosecond() % 2 == 0`
	case 1, 2:
		// Per-delivery to the prover, constant in practice.
		return `now().Year() > 2000`
	case 3, 4:
		return `payload.tag != nil`
	case 5, 6, 7:
		return `payload.region != "us"`
	default:
		return `payload.qty != 3`
	}
}

func (g *routeGen) mapStep() string {
	if m := g.mapPathStep(); m != "" {
		return m
	}
	switch g.rng.IntN(6) {
	case 0:
		g.volatile["stamp"] = true
		return "map { stamp = string(now().UnixNano()) }\n"
	case 1:
		// Rewrites the key field with a per-delivery value.
		g.volatile["id"] = true
		return "map { id = message_id }\n"
	case 2:
		// Rewrites the key field, stably (records without an id get one).
		return "map { id = string(payload.id) + \"-m\" }\n"
	case 3:
		return "map { region = upper(payload.region) }\n"
	default:
		return "map { qty = payload.qty * 10 }\n"
	}
}

// handler is a handle step: a SQL write or a file append of its own.
func (g *routeGen) handler() string {
	if h := g.reachHandler(); h != "" {
		return h
	}
	if h := g.mongoHandler(); h != "" {
		return h
	}
	if g.chance(30) {
		return "handle " + g.fileLeaf("", false) + "\n"
	}
	report := g.chance(50)
	leaf := g.sqlLeaf("", report)
	if report {
		g.outcome = `meta["sql.outcome"]`
	}
	return "handle " + leaf + "\n"
}

func (g *routeGen) outputStep() string {
	switch g.rng.IntN(3) {
	case 0:
		if g.outcome != "" {
			return fmt.Sprintf("filter %s != \"existed\"\n", g.outcome)
		}
		return "filter " + g.filterExpr() + "\n"
	case 1:
		return g.mapStep()
	default:
		return "retry { attempts = 3, backoff = 10ms }\n"
	}
}

// sink returns a `to` target; group, if set, is the comparison group a
// leaf joins (the branches of a per-delivery switch share one).
func (g *routeGen) sink(depth int, group string) string {
	if to := g.clickhouseLeaf(group); to != "" {
		return to
	}
	if to := g.objectStoreLeaf(group); to != "" {
		return to
	}
	if to := g.mongoLeaf(depth, group); to != "" {
		return to
	}
	r := g.rng.IntN(100)
	if depth >= 2 || group != "" {
		r %= 70
	}
	switch {
	case r < 45:
		return g.sqlLeaf(group, false)
	case r < 60:
		return g.fileLeaf(group, true)
	case r < 70:
		return g.fileLeaf(group, false)
	case r < 80:
		return g.switchSink(depth)
	case r < 90:
		return fmt.Sprintf("fanout {\nto %s\nto %s\n}", g.sink(depth+1, ""), g.sink(depth+1, ""))
	default:
		call := g.sqlLeaf("", true)
		var fwd string
		if g.chance(50) {
			before := len(g.arts)
			fwd = fmt.Sprintf("switch {\non = meta[\"sql.outcome\"]\ncase \"inserted\" { to %s }\ncase \"existed\" { to %s }\ndefault { to %s }\n}",
				g.sink(depth+2, ""), g.sink(depth+2, ""), g.sink(depth+2, ""))
			for i := before; i < len(g.arts); i++ {
				g.arts[i].AnyBranch = true
			}
		} else {
			fwd = g.sink(depth+1, "")
		}
		return fmt.Sprintf("request {\ncall %s\nforward %s\n}", call, fwd)
	}
}

func (g *routeGen) switchSink(depth int) string {
	if g.chance(30) {
		// On a per-delivery value: a record may take either branch, so the
		// branches are one comparison group and are built alike.
		group := fmt.Sprintf("%s/switch%d", g.name, g.next())
		leaf := g.rng.Uint64()
		mk := func() string {
			saved := g.rng
			g.rng = rand.New(rand.NewPCG(leaf, 1))
			defer func() { g.rng = saved }()
			defer g.c.sideStreamsFrom(leaf)()
			return g.sink(depth+1, group)
		}
		return fmt.Sprintf("switch {\non = string(now().Nanosecond() %% 2)\ncase \"0\" { to %s }\ndefault { to %s }\n}", mk(), mk())
	}
	on := g.pick(`payload.region`, `payload.tag`)
	var cases []string
	if on == "payload.region" {
		cases = []string{"eu", "us"}
	} else {
		cases = []string{"t0", "t1"}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "switch {\non = %s\n", on)
	for _, cv := range cases {
		fmt.Fprintf(&b, "case %q { to %s }\n", cv, g.sink(depth+1, ""))
	}
	if g.chance(80) {
		fmt.Fprintf(&b, "default { to %s }\n", g.sink(depth+1, ""))
	}
	b.WriteString("}")
	return b.String()
}

// fileLeaf is a file sink: parts named by position or by the clock, or
// an appended file.
func (g *routeGen) fileLeaf(group string, parts bool) string {
	n := g.next()
	if parts {
		path := fmt.Sprintf("out/%s__p%d", g.name, n)
		if len(g.c.partDirs) > 0 && g.c.aux.IntN(100) < 30 {
			// Another route's part directory: two routes writing
			// positional parts into one directory must be refused (or
			// keep both routes' records apart).
			other := g.c.partDirs[g.c.aux.IntN(len(g.c.partDirs))]
			if !strings.HasPrefix(other, "out/"+g.name+"__") {
				path = other
			}
		}
		g.c.partDirs = append(g.c.partDirs, path)
		g.arts = append(g.arts, Artifact{Kind: "parts", Path: path, Group: orGroup(group, path), Volatile: g.volatileFields()})
		nameBy := "source_position"
		if g.c.aux.IntN(100) < 25 {
			// Parts named by the clock: a replay writes its records into
			// a part of another name, which at most at-least-once allows.
			nameBy = "write_time"
		}
		if g.c.Broker == brokerMongo {
			// The mongodb source's positions do not follow its documents:
			// the compiler refuses positional parts over it.
			nameBy = "write_time"
		}
		return fmt.Sprintf("file { path = %q, name_by = %s }", path, nameBy)
	}
	path := fmt.Sprintf("out/%s__w%d.jsonl", g.name, n)
	g.arts = append(g.arts, Artifact{Kind: "lines", Path: path, Group: orGroup(group, path), Volatile: g.volatileFields()})
	return fmt.Sprintf("file { path = %q }", path)
}

func orGroup(group, path string) string {
	if group != "" {
		return group
	}
	return path
}

// sqlLeaf is a SQLite sink (or handler, or request call): a table with or
// without a unique key, one of the conflict clauses, a key bound to a
// stable or a per-delivery value, SQL functions deterministic or not.
func (g *routeGen) sqlLeaf(group string, report bool) string {
	n := g.next()
	db := fmt.Sprintf("out/%s.db", g.name)
	table := fmt.Sprintf("t%d", n)
	dialect := g.c.serverDialect()
	if dialect != "" {
		// One database holds every route's tables.
		db, table = map[string]string{"postgres": pgPlaceholder, "mariadb": mariaPlaceholder}[dialect], g.name+"_"+table
	}
	art := Artifact{Kind: "table", Path: db, Table: table, Group: orGroup(group, db+":"+table)}
	keyed := g.chance(75) || g.forced != nil
	var ddl string
	if keyed {
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id %s, qty INTEGER, body TEXT, big INTEGER, x TEXT)", table,
			g.pick("TEXT PRIMARY KEY", "TEXT PRIMARY KEY", "TEXT UNIQUE"))
	} else {
		ddl = fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (rid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, qty INTEGER, body TEXT, big INTEGER, x TEXT)", table)
		// The row id counts inserts: which record got which number is
		// arrival order, not content.
		art.Volatile = append(art.Volatile, "rid")
	}

	// The key.
	type val struct {
		sql      string
		volatile bool
	}
	keyOpts := []val{
		{`${payload.id}`, g.volatile["id"]},
		{`lower(${payload.id})`, g.volatile["id"]},
		{`${message_id}`, true},
		{`${string(now().UnixNano())}`, true},
		{`hex(randomblob(8))`, true},
	}
	if g.idSet {
		keyOpts = append(keyOpts, val{`${meta["mqb.id"]}`, g.idVolatile}, val{`${meta["mqb.id"]}`, g.idVolatile}, val{`${meta["mqb.id"]}`, g.idVolatile})
	}
	if g.chance(3) {
		keyOpts = []val{{`'k-${payload.id}'`, g.volatile["id"]}}
	}
	if report && g.chance(95) {
		// report_outcome needs a deterministic key (E043): mostly give it one.
		keyOpts = slices.DeleteFunc(keyOpts, func(v val) bool { return v.volatile || strings.Contains(v.sql, "randomblob") })
		if len(keyOpts) == 0 {
			keyOpts = []val{{`${payload.id}`, g.volatile["id"]}}
		}
	}
	key := keyOpts[g.rng.IntN(len(keyOpts))]
	if k := g.envSQLKey(); k != "" && g.forced == nil && !(report && g.volatile["id"]) {
		// (report_outcome needs a stable key, E043: not over an id a map
		// rewrote per delivery.)
		key = val{k, g.volatile["id"]}
	}
	if g.forced != nil {
		key = val{g.forced.sqlKey, g.forced.volatile}
	}
	cols := []string{"id", "qty"}
	vals := []string{key.sql, g.pick(`${payload.qty}`, `${payload.qty}`, `abs(${payload.qty})`)}
	if key.volatile {
		art.Volatile = append(art.Volatile, "id")
	}
	if g.volatile["qty"] {
		art.Volatile = append(art.Volatile, "qty")
	}
	if g.chance(50) {
		cols = append(cols, "body")
		vals = append(vals, g.pick(`${payload.body}`, `upper(${payload.body})`))
	}
	if g.chance(40) {
		cols = append(cols, "big")
		vals = append(vals, `${payload.big}`)
	}
	if g.chance(50) {
		x := []val{
			{`${payload.tag}`, g.volatile["tag"]},
			{`${payload.region}`, g.volatile["region"]},
			{`${string(now().UnixNano())}`, true},
			{`random()`, true},
			{`${message_id}`, true},
		}
		if g.volatile["stamp"] {
			x = append(x, val{`${payload.stamp}`, true})
		}
		v := x[g.rng.IntN(len(x))]
		cols = append(cols, "x")
		vals = append(vals, v.sql)
		if v.volatile {
			art.Volatile = append(art.Volatile, "x")
		}
	}
	values := "(" + strings.Join(vals, ", ") + ")"
	var second []string
	if g.chance(4) {
		// A second row keyed on a per-delivery value.
		second = slices.Clone(vals)
		second[0] = `${message_id}`
		values += ", (" + strings.Join(second, ", ") + ")"
		if !slices.Contains(art.Volatile, "id") {
			art.Volatile = append(art.Volatile, "id")
		}
	}

	verb, conflict := "INSERT INTO", ""
	r := g.rng.IntN(100)
	if report && g.chance(85) {
		r %= 30 // ON CONFLICT (id) DO NOTHING: the outcome has a duplicate to report
	}
	if g.forced != nil {
		r = 0
	}
	switch {
	case r < 30:
		conflict = "ON CONFLICT (id) DO NOTHING"
	case r < 38:
		conflict = "ON CONFLICT DO NOTHING"
	case r < 53:
		var sets []string
		for _, c := range cols[1:] {
			sets = append(sets, fmt.Sprintf("%s = excluded.%s", c, c))
			art.Mutable = append(art.Mutable, c)
		}
		conflict = "ON CONFLICT (id) DO UPDATE SET " + strings.Join(sets, ", ")
	case r < 63:
		conflict = fmt.Sprintf("ON CONFLICT (id) DO UPDATE SET qty = %s.qty + excluded.qty", table)
		art.Mutable = append(art.Mutable, "qty")
	case r < 68:
		conflict = fmt.Sprintf("ON CONFLICT (id) DO UPDATE SET qty = excluded.qty WHERE excluded.qty > %s.qty", table)
		art.Mutable = append(art.Mutable, "qty")
	case r < 72:
		conflict = "ON CONFLICT (id) DO UPDATE SET body = 'updated'"
		art.Mutable = append(art.Mutable, "body")
	case r < 84:
		verb = "INSERT OR IGNORE INTO"
	case r < 88:
		verb = "INSERT OR REPLACE INTO"
		art.Mutable = append(art.Mutable, cols[1:]...)
	}
	if !keyed && strings.Contains(conflict, "(id)") {
		// The database refuses a conflict target that matches no unique
		// index, so every run of such a route fails and tests nothing
		// (the build warns, W010). The draw is kept so that every seed
		// generates the routes it generated before.
		g.chance(80)
		conflict = "ON CONFLICT DO NOTHING"
	}
	query := fmt.Sprintf("%s %s (%s) VALUES %s", verb, table, strings.Join(cols, ", "), values)
	if conflict != "" {
		query += " " + conflict
	}
	if dialect == "" && !report && g.forced == nil {
		if rule, ok := g.sqlRuleShape(table, ddl, keyed, cols, len(second) > 0); ok {
			ddl, verb, conflict = rule.ddl, rule.verb, rule.conflict
			switch {
			case rule.selectForm:
				query = fmt.Sprintf("%s %s (%s) SELECT %s WHERE true", verb, table, strings.Join(cols, ", "), strings.Join(vals, ", "))
			default:
				query = fmt.Sprintf("%s%s %s (%s) VALUES %s", rule.with, verb, table, strings.Join(cols, ", "), values)
			}
			if conflict != "" {
				query += " " + conflict
			}
			for _, c := range rule.mutable {
				if !slices.Contains(art.Mutable, c) {
					art.Mutable = append(art.Mutable, c)
				}
			}
		}
	}
	if keyed && !key.volatile && g.reorders() &&
		(strings.Contains(conflict, "DO NOTHING") || verb == "INSERT OR IGNORE INTO" || updateKeepsInserted(conflict, cols[1:])) {
		art.FirstWins = true
	}
	if keyed && !key.volatile {
		// A keyed table holds one row per key, and which record of a key
		// wrote it can change with the order replays reach it (a request's
		// outcome, a DO UPDATE): the loss check asks for the key only —
		// and leaves out a column the DO UPDATE sets that the INSERT does
		// not write (body = 'updated'), kept above.
		for _, c := range cols[1:] {
			if !slices.Contains(art.Mutable, c) {
				art.Mutable = append(art.Mutable, c)
			}
		}
	}
	url := "sqlite://" + db
	if dialect != "" {
		ddl, query = sqlLeafText{ddl: ddl, verb: verb, conflict: conflict, table: table, cols: cols, vals: vals,
			secondRow: second, keyed: keyed}.translate(dialect, g.c.srv)
		url = db
	}
	g.arts = append(g.arts, art)
	var b strings.Builder
	fmt.Fprintf(&b, "sql {\nurl = %q\n", url)
	if g.chance(75) {
		fmt.Fprintf(&b, "create_table = %q\n", ddl)
	} else {
		g.c.Setup = append(g.c.Setup, SetupSQL{DB: db, SQL: ddl})
	}
	fmt.Fprintf(&b, "insert_query = \"\"\"%s\"\"\"\n", query)
	if report {
		b.WriteString("report_outcome = true\n")
	}
	b.WriteString("}")
	return b.String()
}

// updateKeepsInserted reports whether a DO UPDATE leaves a column the
// INSERT writes as the first insert of its key wrote it (SET qty = … WHERE
// a guard keeps body): like DO NOTHING, which record of a key wrote that
// column is the order the sink workers applied them, in a clean run too.
func updateKeepsInserted(conflict string, cols []string) bool {
	_, sets, ok := strings.Cut(conflict, "DO UPDATE SET ")
	if !ok {
		return false
	}
	sets, _, _ = strings.Cut(sets, " WHERE ")
	for _, c := range cols {
		if !strings.Contains(sets, c+" = ") {
			return true
		}
	}
	return false
}

// sideStreamsFrom points every side stream the case has (the shapes added
// later, each drawing from a stream of its own) at one seeded from leaf,
// and returns what puts them back. The branches of a switch on a
// per-delivery value must be built alike (a record may land in either, and
// they are one comparison group): drawing a later shape from the case's
// own stream would give the two branches different sinks (seed-13191: one
// keyed by now(), the other by env("HOME")).
func (c *Case) sideStreamsFrom(leaf uint64) (restore func()) {
	streams := []**rand.Rand{&c.aux, &c.ext, &c.tx, &c.srv, &c.ch, &c.sq, &c.dq, &c.un, &c.rch, &c.obx, &c.envx, &c.obj, &c.mgs}
	saved := make([]*rand.Rand, len(streams))
	for i, p := range streams {
		saved[i] = *p
		if *p != nil {
			*p = rand.New(rand.NewPCG(leaf, uint64(i)+2))
		}
	}
	return func() {
		for i, p := range streams {
			*p = saved[i]
		}
	}
}
