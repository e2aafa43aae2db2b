// Package plan is the contract between the compiler and the runtime: the
// checked, resolved description of every route, with its proven delivery
// guarantee and the reasons for it. `mqbc build -o plan.json` writes it;
// `mqbc run` compiles to it in memory and hands it to the runtime, which never
// reads the AST. Every attribute is resolved (defaults filled in from stdlib),
// every expression is kept as expr-lang source text (never evaluated here, so
// env() values never enter a plan), and Redacted hides URL passwords before
// a plan is written anywhere a person can read it.
package plan

import (
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/diag"
)

// Version is the plan format version written into every plan.
const Version = 1

// Guarantee values, as they appear in the plan JSON. ExactlyOnce is
// stronger than EffectivelyOnce: the source position commits in the sink's
// own transaction (the transactional outbox), so no row is ever written
// twice, not even by a plain INSERT; `guarantee effectively_once` accepts it.
const (
	ExactlyOnce     = "exactly-once"
	EffectivelyOnce = "effectively-once"
	AtLeastOnce     = "at-least-once"
	// AtMostOnce: a crash can lose records (core NATS and other
	// fire-and-forget sources, MQTT QoS 0). The weakest rung.
	AtMostOnce = "at-most-once"
)

// GuaranteeRank orders the verdict ladder: exactly-once 3,
// effectively-once 2, at-least-once 1, at-most-once 0; -1 for anything
// else. A route's verdict is the weakest over its effects.
func GuaranteeRank(g string) int {
	switch g {
	case ExactlyOnce:
		return 3
	case EffectivelyOnce:
		return 2
	case AtLeastOnce:
		return 1
	case AtMostOnce:
		return 0
	}
	return -1
}

// Plan is the whole build output.
type Plan struct {
	Version int     `json:"version"`
	Routes  []Route `json:"routes"`
}

// Route is one compiled route.
type Route struct {
	Name      string   `json:"name"`
	Guarantee string   `json:"guarantee"`
	Reasons   []string `json:"reasons"`
	Warnings  []string `json:"warnings,omitempty"`
	// Premises are what the proof assumes about the world it cannot see;
	// the runtime checks each before the first record (When = start-up)
	// or on every record (When = per-record) and refuses, naming it,
	// when one fails.
	Premises []Premise `json:"premises,omitempty"`
	// Elided are steps the compiler removed because another node already
	// does what they do (see Elision).
	Elided      []Elision `json:"elided,omitempty"`
	Concurrency int       `json:"concurrency"`
	BatchSize   int       `json:"batch_size"`
	// Nodes in execution order: the source, the input-side steps, the
	// handler (if any), the output-side steps, the sink.
	Nodes []Node   `json:"nodes"`
	Edges []Edge   `json:"edges"`
	Pos   diag.Pos `json:"pos"`
}

// Elision is a step the compiler left out of Nodes. The one kind so far:
// a dedup whose key is the key on which the sink's conflict clause keeps
// the first row and absorbs every repeat, so the sink drops what the
// dedup would have. The runtime then counts the repeats the sink absorbs
// as deduplicated, as the dedup would have counted them.
type Elision struct {
	Kind string   `json:"kind"` // "dedup"
	Key  string   `json:"key"`  // the dedup's key expression
	By   string   `json:"by"`   // the node that absorbs the repeats
	Why  string   `json:"why"`
	Pos  diag.Pos `json:"pos"`
}

// Premise kinds.
const (
	// PremiseUniqueKey: the SQL table has a UNIQUE or PRIMARY KEY index
	// whose columns are all among Columns (the columns bound to stable
	// values), so a replayed row conflicts instead of landing twice.
	PremiseUniqueKey = "unique_key"
	// PremiseReplaceStableColumns: every column of the SQL table that a
	// REPLACE INTO / INSERT OR REPLACE leaves out (Columns are the ones it
	// writes) has a literal DEFAULT or none and is not filled by the
	// database (auto-increment, SQLite's rowid alias), so the row a replay
	// writes anew is the row the first delivery wrote.
	PremiseReplaceStableColumns = "replace_stable_columns"
	// PremiseReplacingMergeTree: the ClickHouse table's engine is a
	// ReplacingMergeTree and its sorting key's columns are all among
	// Columns (the columns bound to stable values).
	PremiseReplacingMergeTree = "replacing_merge_tree"
	// PremiseUniqueIndex: the MongoDB collection has a unique index on
	// Columns (id_field maps to _id, which always has one).
	PremiseUniqueIndex = "unique_index"
	// PremiseProducerID (per record): the record carries an id its
	// producer stamped (Nats-Msg-Id or the mq_bridge.message_id header);
	// a record without one goes to the DLQ.
	PremiseProducerID = "producer_id"
	// PremiseKeyPresent (per record): every value the key is rendered
	// from is present and non-null (Columns names the fields or
	// columns); a record that lacks one goes to the DLQ.
	PremiseKeyPresent = "key_present"
	// PremiseUpdateLeavesUniques (start-up, on a sql sink): no UNIQUE or
	// PRIMARY KEY index of Target holds a column a DO UPDATE / ON
	// DUPLICATE KEY UPDATE moves (Columns), other than the conflict key
	// itself (Key; when Key is empty, the statement names no target and
	// the table's only unique index may hold them). Such an update decides
	// which later records that index refuses, so a replay after a crash
	// can land a record the first run refused.
	PremiseUpdateLeavesUniques = "update_leaves_uniques"
	// PremiseRepeatInsertable (start-up, on a sql handler): Target has no
	// UNIQUE or PRIMARY KEY index or constraint, other than one on exactly
	// the conflict target (Key, when the statement names one), that a
	// repeat of the insert into Columns conflicts on: each has a column
	// outside Columns that is auto-increment (identity, serial, a
	// sequence's nextval default) or nullable with no default, and every
	// one is plain (no expression, no WHERE, no exclusion constraint, not
	// NULLS NOT DISTINCT). create_table showed no such key, but the table
	// may already exist with other keys (CREATE TABLE IF NOT EXISTS, or
	// the create_table of another endpoint). A handler whose replay fails
	// on such a key dead-letters a record replayed after a crash, and the
	// sink after it never gets the record.
	PremiseRepeatInsertable = "repeat_insertable"
	// PremiseTransactionalTable (start-up, on a sql sink under the
	// transactional outbox): Target is a table whose writes commit and
	// roll back with the transaction (InnoDB on MySQL and MariaDB; an
	// ordinary or partitioned table on PostgreSQL), so a batch's rows and
	// the outbox position past them land together or not at all. A MyISAM
	// table keeps the rows of a transaction a crash cut short while the
	// position rolls back, and the replay writes them again.
	PremiseTransactionalTable = "transactional_table"
	// PremiseNoTriggers (start-up, on a sql or clickhouse sink): nothing
	// in the database runs on a write to Target but the write itself: on
	// PostgreSQL no trigger (but the internal ones that enforce foreign
	// keys) and no rewrite rule, on Target or on any of its partitions;
	// on MySQL, MariaDB and SQLite no trigger; on ClickHouse no
	// materialized view reading the table. A trigger's effect is not the
	// row's, and a replay can fire it again (a BEFORE INSERT trigger, a
	// statement trigger and a rule on every delivery, an UPDATE trigger
	// on a DO UPDATE, a materialized view on every inserted block), so
	// the proof that the write absorbs a replay does not cover it.
	PremiseNoTriggers = "no_triggers"
	// PremisePutIfAbsent: the object store refuses a second write of one
	// name made with If-None-Match: * (412), so a part, once written, is
	// never replaced, and it lists an object as soon as it is written, so
	// the listing a positional sink starts with sees every earlier part.
	// Target is the store's url.
	PremisePutIfAbsent = "put_if_absent"
	// PremiseIncreasingID (per record, on a source): documents are
	// inserted into the collection (Target, database.collection) in
	// increasing _id order, all with _ids of one BSON type, so a source
	// that streams new documents by `_id > the last one read` misses none;
	// or rows reach a sql source's table (Target, table.cursor_column) with
	// cursor values above those already committed. The source stops the
	// route when it finds one inserted behind its cursor or out of its
	// reach.
	PremiseIncreasingID = "increasing_id"
	// PremisePrimaryKey (start-up, on a source): every table of the
	// publication (Target) has a primary key, so a postgres_cdc snapshot
	// can read each in key order and give each row an id from its key.
	PremisePrimaryKey = "primary_key"
	// PremiseSessionKept (per connection, on a source): the MQTT broker
	// keeps the persistent session of the source's client_id (Target),
	// its subscription and the QoS 1 messages queued for it, while the
	// route is stopped or disconnected. The source checks the CONNACK's
	// session present flag on every connection and stops the route when
	// a session it had, or that the route's checkpoint says it had, is
	// gone.
	PremiseSessionKept = "session_kept"
	// PremiseSlotKept (per connection, on a postgres_cdc source): the
	// replication slot (Target) is not dropped while the route is down.
	// A slot made again starts at the server's current position, so the
	// changes after the route's checkpoint would be passed over: the
	// source stops the route when it resumes from a checkpoint and finds
	// the slot gone.
	PremiseSlotKept = "slot_kept"
	// PremiseQueueKeepsMessages (start-up, on an amqp source): the queue
	// (Target) drops no message by itself: durable, not auto-delete, and
	// among its arguments no message TTL, queue expiry, delivery limit or
	// length limit that drops from the head. The source learns its flags
	// and arguments before the first record.
	PremiseQueueKeepsMessages = "queue_keeps_messages"
	// PremiseStreamKeepsMessages (start-up, on a JetStream nats source):
	// the stream (Target) removes no message by itself before the route
	// has committed it: no max_age, no per-message TTLs, no rollups, and
	// max_msgs, max_bytes and max_msgs_per_subject only where a publish
	// past them is refused (discard new, and discard_new_per_subject for
	// the per-subject limit). The server drops a message its limits remove
	// from the consumer's pending acknowledgements, so a message held
	// unacknowledged at a crash and removed before the next run is never
	// delivered again, and nothing shows it.
	PremiseStreamKeepsMessages = "stream_keeps_messages"
	// PremiseProcessUnchanged (start-up, on the source): what the route's
	// expressions read from the process rather than the record (Columns:
	// ProcessEnvPrefix+NAME for env("NAME"), ProcessLocalZone,
	// ProcessTZDatabase) is what it was when the route last stopped
	// without draining (a crash, SIGKILL, a failed record), so the
	// records it delivered past its committed position and now reads
	// again get the keys and decisions they got then. The engine keeps a
	// fingerprint of each beside the route's checkpoint while records are
	// in flight, forgets it when the route drains, and refuses to start
	// when one differs.
	PremiseProcessUnchanged = "process_unchanged"
)

// What a PremiseProcessUnchanged names in Columns.
const (
	ProcessEnvPrefix  = "env:"
	ProcessLocalZone  = "local time zone"
	ProcessTZDatabase = "time zone database"
)

// When a premise is checked.
const (
	CheckStartup   = "start-up"
	CheckPerRecord = "per-record"
	// CheckPerConnection: checked by the node on every connection it
	// makes to the system, the first and each reconnect (armed before
	// the first record, as a per-record premise is).
	CheckPerConnection = "per-connection"
)

// Premise is one assumption of a route's proof about the world.
type Premise struct {
	Kind string `json:"kind"` // PremiseUniqueKey, …
	When string `json:"when"` // CheckStartup | CheckPerRecord | CheckPerConnection
	// Node is the ID of the plan node (sink, handler or branch endpoint)
	// the premise is about; the runtime checks it through that node's
	// connector.
	Node string `json:"node"`
	// Target is the table, collection, topic or stream.
	Target  string   `json:"target,omitempty"`
	Columns []string `json:"columns,omitempty"`
	// Key is the conflict key a PremiseUpdateLeavesUniques is proven on,
	// or the conflict target whose index a PremiseRepeatInsertable leaves
	// aside.
	Key []string `json:"key,omitempty"`
	// Holds says in words what must be true: "table orders has a UNIQUE
	// or PRIMARY KEY index on columns among (id)".
	Holds string `json:"holds"`
	// Reason is the verdict reason that needs it.
	Reason string   `json:"reason"`
	Pos    diag.Pos `json:"pos"`
}

// Roles of a node in a route.
const (
	RoleSource  = "source"
	RoleStep    = "step"
	RoleHandler = "handler"
	RoleSink    = "sink"
)

// Sides of a step.
const (
	SideInput  = "input"
	SideOutput = "output"
)

// Node is a source, a step, a handler or a sink.
type Node struct {
	ID   string `json:"id"`   // unique within the route: "n0", "n1", …
	Role string `json:"role"` // RoleSource | RoleStep | RoleHandler | RoleSink
	Kind string `json:"kind"` // a stdlib kind: "file", "id", "dedup", "sql", "switch", …
	Side string `json:"side"` // SideInput | SideOutput
	// Ref names the named endpoint this node was resolved from, if any.
	Ref string `json:"ref,omitempty"`
	// Attrs holds every declared attribute that is set or has a default.
	Attrs map[string]Value `json:"attrs,omitempty"`
	// Expr is the expression of steps written `id <expr>` or `filter <expr>`.
	Expr string `json:"expr,omitempty"`
	// Assign lists a map step's assignments in the order written, when
	// the block does more than set top-level payload fields (a nested
	// path, a delete, the whole payload, a meta key). A block of top-level
	// fields only keeps them in Attrs, field name → value, as before.
	Assign []Assignment `json:"assign,omitempty"`
	// Children are the nested endpoints of structural kinds: switch cases
	// and default, request call and forward, fanout targets, dlq target.
	Children []Branch `json:"children,omitempty"`
	Pos      diag.Pos `json:"pos"`
}

// Targets of a map assignment.
const (
	TargetPayload = "payload"
	TargetMeta    = "meta"
)

// Assignment is one item of a map block. Every value of a block is
// evaluated against the record as it entered the block; then the
// assignments apply in order. No two targets of one block overlap (the
// compiler refuses a target inside another), so the order decides nothing
// about the result.
type Assignment struct {
	// Target is TargetPayload or TargetMeta.
	Target string `json:"target"`
	// Path is, for TargetPayload, the fields from the payload's root
	// (none: the whole payload); for TargetMeta, the one key.
	Path []string `json:"path,omitempty"`
	// Delete removes the field or key; Value is then nil.
	Delete bool     `json:"delete,omitempty"`
	Value  *Value   `json:"value,omitempty"`
	Pos    diag.Pos `json:"pos"`
}

// TargetText renders the target as a user writes it: payload.a.b,
// payload["a b"], payload, meta["k"].
func (a Assignment) TargetText() string {
	if a.Target == TargetMeta {
		k := ""
		if len(a.Path) > 0 {
			k = a.Path[0]
		}
		return "meta[" + strconv.Quote(k) + "]"
	}
	return PayloadPathText(a.Path)
}

// PayloadPathText renders a payload path: payload.a.b, with a field that
// is not a plain name indexed, payload["a b"].
func PayloadPathText(path []string) string {
	var b strings.Builder
	b.WriteString("payload")
	for _, f := range path {
		if isName(f) {
			b.WriteString("." + f)
		} else {
			b.WriteString("[" + strconv.Quote(f) + "]")
		}
	}
	return b.String()
}

func isName(s string) bool {
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return s != ""
}

// Branch labels for Node.Children.
const (
	BranchCase    = "case"
	BranchDefault = "default"
	BranchCall    = "call"
	BranchForward = "forward"
	BranchTo      = "to"
)

// Branch is one nested endpoint of a structural node.
type Branch struct {
	Label string `json:"label"`           // BranchCase, BranchDefault, …
	Match string `json:"match,omitempty"` // the case value, for BranchCase
	Node  Node   `json:"node"`
}

// Edge is data flow from one node to the next.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Value types.
const (
	TString   = "string"
	TInt      = "int"
	TFloat    = "float"
	TBool     = "bool"
	TDuration = "duration"
	TEnum     = "enum"
	TList     = "list"
	TBlock    = "block"
	TExpr     = "expr"     // an expr-lang expression, evaluated per record
	TTemplate = "template" // a string with ${…} placeholders
)

// Value is a resolved attribute value.
type Value struct {
	Type string `json:"type"`
	// Str holds TString and TEnum values, and the written form of a
	// TDuration ("1h").
	Str      string           `json:"str,omitempty"`
	Int      int64            `json:"int,omitempty"` // TInt; nanoseconds for TDuration
	Float    float64          `json:"float,omitempty"`
	Bool     bool             `json:"bool,omitempty"`
	List     []Value          `json:"list,omitempty"`
	Block    map[string]Value `json:"block,omitempty"`
	Expr     string           `json:"expr,omitempty"`     // TExpr: expr-lang source
	Template []Part           `json:"template,omitempty"` // TTemplate
	// Stable records the checker's stability verdict for TExpr and
	// TTemplate values: true when the value is the same on every replay.
	Stable bool `json:"stable,omitempty"`
	// Secret marks a value whose literal text is a secret (a password):
	// Redacted replaces it.
	Secret bool     `json:"secret,omitempty"`
	Pos    diag.Pos `json:"pos"`
}

// Part is a piece of a template: either literal text or an expression
// (already normalised: `${payload:x}` arrives here as `payload.x`).
type Part struct {
	Lit  string `json:"lit,omitempty"`
	Expr string `json:"expr,omitempty"`
}
