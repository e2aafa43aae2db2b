// Package stdlib declares every endpoint kind, step and expression function
// mqb knows: attribute names, types, defaults, required-ness, enum values,
// sides, and the facts the guarantee proof needs (does a source mint stable
// ids, does it have a replayable position and in which modes, how does a sink
// absorb a repeat). It is data, read by the compiler, the runtime's registry,
// `mqbc docs` and the editor grammar generator — one source of truth.
package stdlib

import (
	"sort"
	"strings"
)

// Type is the type of an attribute value.
type Type string

const (
	String   Type = "string"   // "…" or """…"""; may hold ${…} when Template
	Int      Type = "int"      // 42
	Float    Type = "float"    // 1.5 (an int is accepted)
	Bool     Type = "bool"     // true | false
	Duration Type = "duration" // 500ms, 1h
	Enum     Type = "enum"     // one identifier of Attr.Enum
	Expr     Type = "expr"     // an expr-lang expression, evaluated per record
	List     Type = "list"     // [ … ] of Attr.Elem
	Block    Type = "block"    // { … } of Attr.Block attributes
	Any      Type = "any"      // any value (map fields)
)

// Attr declares one attribute of a kind or step.
type Attr struct {
	Name     string
	Type     Type
	Doc      string
	Required bool
	Default  any      // string, int64, float64, bool, time.Duration-string ("5s"), enum ident
	Enum     []string // for Enum
	Elem     Type     // for List
	// Template allows ${…} placeholders in a String attribute.
	Template bool
	// Query marks a String attribute whose placeholders become bound
	// parameters (SQL), never spliced text.
	Query bool
	// Secret marks an attribute whose value must be redacted in output:
	// a URL's password.
	Secret bool
	// SecretValue marks an attribute whose whole literal text is a secret
	// (a password): the plan carries it marked, and redacted output
	// replaces it. Placeholders such as ${env("X")} stay visible.
	SecretValue bool
	// Deprecated names the attribute that replaces this one.
	Deprecated string
	// End is the one end of a kind the attribute applies to (EndSource:
	// `from kafka { group_id }`; EndSink: `to kafka { partition_key }`);
	// empty when it applies to both. Set at the other end, it is an error:
	// that end would ignore it.
	End string
}

// The ends of an endpoint kind an attribute may apply to.
const (
	EndSource = "source"
	EndSink   = "sink"
)

// sourceEnd and sinkEnd give a shared attribute declaration one end, for
// the kinds where only that end reads it.
func sourceEnd(a Attr) Attr { a.End = EndSource; return a }
func sinkEnd(a Attr) Attr   { a.End = EndSink; return a }

// Side says where in a route a step may stand.
type Side string

const (
	InputOnly  Side = "input"
	OutputOnly Side = "output"
	Both       Side = "both"
)

// Step declares a route step (a middleware).
type Step struct {
	Name string
	Doc  string
	Side Side
	// ExprArg: the step is written `name <expr>` (id, filter).
	ExprArg bool
	// Free: the block holds arbitrary `field = <expr>` pairs (map).
	Free bool
	// Nested: the block holds one `to <kind> { … }` (dlq).
	Nested bool
	// PathArg: the step is written `name payload.path [as NAME]` (unnest).
	PathArg bool
	Attrs   []Attr
}

// ProducerIDFacts are the words of a producer-stamped id's premise: where
// the producer puts the id (Header), the attribute naming what the source
// reads (Target), and what message_id is on a message without one
// (Without).
type ProducerIDFacts struct {
	Header, Target, Without string
}

// Absorb says how a sink absorbs a repeated write.
type Absorb string

const (
	AbsorbNone       Absorb = "none"       // a repeat lands twice (brokers, write_time files)
	AbsorbConflict   Absorb = "conflict"   // SQL conflict clause on stable columns
	AbsorbKeyField   Absorb = "key_field"  // Mongo id_field
	AbsorbEngine     Absorb = "engine"     // ClickHouse ReplacingMergeTree
	AbsorbPositional Absorb = "positional" // name_by = source_position
	AbsorbStructural Absorb = "structural" // switch/request/fanout: decided per branch
)

// Kind declares an endpoint kind usable after from/to/handle/call/forward.
type Kind struct {
	Name   string
	Doc    string
	Source bool // usable after `from`
	Sink   bool // usable after `to`, `call`, `forward`, `handle`
	Attrs  []Attr
	// IDs says whether the source's message_id is the same on every replay
	// of a record (see IDStability).
	IDs IDStability
	// IDNote explains where message_id comes from.
	IDNote string
	// ProducerIDsIf names a bool source attribute that must be true for
	// IDsFromProducer to hold (amqp's producer_ids): unset or false, the
	// route has not said its producers stamp ids, and message_id counts
	// as a fresh id per delivery.
	ProducerIDsIf string
	// ProducerID says, for a source whose ids come from the producer,
	// where the producer stamps its id and what the source reads: the
	// words of the per-record premise a proof resting on it carries.
	ProducerID *ProducerIDFacts
	// Formats lists, per role ("source", "sink", "handler"), the formats
	// the connector's reader or writer implements; the compiler refuses
	// any other at build time (E026). A role with no entry runs its
	// format attribute's default only; a handler with none takes the
	// sink's.
	Formats map[string][]string
	// PositionModes lists the values of the `mode` attribute under which
	// the source has a replayable position; ["*"] means every mode, nil
	// means never.
	PositionModes []string
	// SourceMeta lists the mqb.src.* keys the source sets (with
	// source_metadata = true); the checker rejects reading any other.
	SourceMeta []SourceMeta
	// AtMostOnce lists the settings under which the source cannot replay
	// a record it handed out before a crash (core NATS, a file followed
	// from its end): a route over it is at-most-once.
	AtMostOnce []Loss
	// Unimplemented names an end (EndSource or EndSink) the language
	// declares and this runtime cannot run yet, with what is missing. The
	// compiler refuses such an end (E027) instead of letting the route
	// fail at start-up; the runtime's registry test checks the list
	// against the builders it has.
	Unimplemented map[string]string
	// CDC marks change-data-capture sources (identity is not a version).
	CDC bool
	// NoPositionWith names a bool attribute that, when true, takes the
	// source's replayable position away (postgres_cdc's snapshot).
	NoPositionWith string
	// SourcePremises are what a source assumes about the system it reads
	// to lose nothing: every route over it carries them in its plan
	// (whatever its verdict) and the source checks them as it reads.
	SourcePremises []SourcePremise
	// Broker marks sinks that cannot deduplicate (Kafka, NATS).
	Broker bool
	// Absorb is how the sink absorbs a repeat (refined by the checker,
	// e.g. SQL depends on the insert's conflict clause).
	Absorb Absorb
	// Structural kinds hold nested endpoints instead of a connection.
	Structural bool
	// Schemes lists the URL schemes accepted by the `url` attribute.
	Schemes []string
}

// IDStability says where a source's message_id comes from.
type IDStability string

const (
	// IDsPerRead: a fresh UUIDv7 per read, so a replay has a new id.
	IDsPerRead IDStability = ""
	// IDsStable: derived from the record itself (a CDC change's table, key
	// and LSN; a cursor row's table and cursor value).
	IDsStable IDStability = "stable"
	// IDsFromProducer: taken from an id the record's producer stamped
	// (the mq_bridge.message_id header, Nats-Msg-Id); a record without one
	// gets an id that is not both stable and unique, so a proof that
	// relies on message_id carries a per-record premise that the id is
	// there.
	IDsFromProducer IDStability = "producer"
)

// SourcePremise is one assumption a source's reading rests on.
type SourcePremise struct {
	Kind string // a plan premise kind (plan.PremiseIncreasingID)
	// Target lists the source attributes, joined with ".", that name
	// what the premise is about (database, collection).
	Target []string
	// Unnamed is the target's words when none of the Target attributes
	// is set (nats's stream, found by the subject).
	Unnamed string
	// Holds says what must be true; %s is the target.
	Holds string
	// Why is the reason the route needs it.
	Why string
	// If names a bool attribute the premise applies under ("": always).
	If string
	// When is when it is checked (plan.CheckStartup,
	// plan.CheckPerConnection or, when "", plan.CheckPerRecord).
	When string
}

// SourceMeta is one mqb.src.* provenance key a source sets.
type SourceMeta struct {
	Key string // "mqb.src.offset"
	// Stable: the value repeats when the same record is delivered again.
	Stable bool
	// Positional: the value is a position, which repeats only under the
	// source's replayable modes (PositionModes).
	Positional bool
	// Unless names a bool attribute that, when true, means the source
	// does not set the key (no_jetstream for the JetStream keys).
	Unless string
	Doc    string
}

// Loss is a setting under which a source is at-most-once.
type Loss struct {
	Attr  string // "mode", "no_jetstream"; "" when the source always loses (stdin)
	Value string // "subscribe", "true"
	Why   string
}

// SourceMetaKey returns the declaration of the mqb.src.* key, if the
// source sets it.
func (k *Kind) SourceMetaKey(key string) (SourceMeta, bool) {
	for _, m := range k.SourceMeta {
		if m.Key == key {
			return m, true
		}
	}
	return SourceMeta{}, false
}

// SourceMetaKeys lists the mqb.src.* keys the source sets.
func (k *Kind) SourceMetaKeys() []string {
	var out []string
	for _, m := range k.SourceMeta {
		out = append(out, m.Key)
	}
	return out
}

// HasPosition reports whether the source has a replayable position when its
// mode attribute is mode.
func (k *Kind) HasPosition(mode string) bool {
	if k.NoPositionWith != "" && mode == k.NoPositionWith {
		return false // the compiler sets mode so when the attribute is true
	}
	for _, m := range k.PositionModes {
		if m == "*" || m == mode {
			return true
		}
	}
	return false
}

// Attr returns the attribute named name, or nil.
func (k *Kind) Attr(name string) *Attr { return findAttr(k.Attrs, name) }

// Attr returns the attribute named name, or nil.
func (s *Step) Attr(name string) *Attr { return findAttr(s.Attrs, name) }

func findAttr(as []Attr, name string) *Attr {
	for i := range as {
		if as[i].Name == name {
			return &as[i]
		}
	}
	return nil
}

// LookupKind returns the endpoint kind named name.
func LookupKind(name string) (*Kind, bool) {
	for i := range Kinds {
		if Kinds[i].Name == name {
			return &Kinds[i], true
		}
	}
	return nil, false
}

// LookupStep returns the step named name.
func LookupStep(name string) (*Step, bool) {
	for i := range Steps {
		if Steps[i].Name == name {
			return &Steps[i], true
		}
	}
	return nil, false
}

// KindNames lists every kind name, sorted.
func KindNames() []string {
	var out []string
	for _, k := range Kinds {
		out = append(out, k.Name)
	}
	sort.Strings(out)
	return out
}

// StepNames lists every step name, sorted.
func StepNames() []string {
	var out []string
	for _, s := range Steps {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// Route settings, written `name = value` at the top of a route body.
var Settings = []Attr{
	{Name: "concurrency", Type: Int, Default: int64(1), Doc: "Number of workers writing batches to the sink. Above 1, batches complete out of order; the source still commits only the highest contiguous acked position."},
	{Name: "batch_size", Type: Int, Default: int64(1024), Doc: "Records per batch read from the source and written to the sink in one transaction."},
}

// Guarantees are the values of the `guarantee` route setting.
var Guarantees = []string{"effectively_once", "at_least_once"}

// IsOutcomeKey reports whether a meta key is the outcome a kind with
// report_outcome tags written records with: "<kind>.outcome".
func IsOutcomeKey(key string) bool {
	kind, ok := strings.CutSuffix(key, ".outcome")
	if !ok {
		return false
	}
	k, found := LookupKind(kind)
	return found && k.Attr(reportOutcomeAttr.Name) != nil
}
