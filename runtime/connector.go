package runtime

// The connector API: what a connector package outside runtime (see
// connector/) builds a source or a sink with. This file is the whole of
// it. The engine's own code keeps its unexported names: source, sink,
// premiseTarget and the like are aliases of the interfaces here, and
// Program, Template and BuildEnv are defined on the engine's program,
// recordTemplate and buildEnv, so converting between the two names costs
// nothing.
//
// A connector package registers its kind in init:
//
//	func init() {
//		runtime.RegisterSink("http", func(b *runtime.BuildEnv, cfg *config) (runtime.Sink, []*runtime.Program, error) {
//			…
//		})
//	}
//
// (RegisterSource for a source), and is linked into a binary by a blank
// import (connector/all imports every one), as database/sql drivers are.
// The contract a sink keeps:
//
//   - Write gets a batch. When it returns nil, every record it did not
//     Refuse is durable in the target: the engine acks it and the route's
//     position moves past it at the next commit.
//   - A record the target refuses on its own (a constraint, a value of the
//     wrong type) is marked with Record.Refuse and the rest of the batch is
//     written: the engine dead-letters it with the reason, or, with no
//     dlq, stops the route before committing past it.
//   - An error a new attempt can fix (a lost connection, a timeout) is
//     returned wrapped in Retryable: the route's retry step writes the
//     whole batch again. Any other error stops the route.
//   - Close releases the sink's connections when the route is done.
//
// Programs a builder returns are the expressions the sink evaluates per
// record: they decide which parts of a record (its payload, its
// message_id) the route decodes or mints before the sink sees it.
//
// The contract a source keeps is Source's, below.

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/internal/jsonvalue"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
	"github.com/mqb-dev/mqb/stdlib"
)

// Sink writes batches of live records; see the contract above.
type Sink interface {
	Write(ctx context.Context, recs []*Record) error
	Close() error
}

// LineSink is a sink that writes each record as a line, its payload and a
// newline (AppendLines without the envelope), and can take the lines as a
// source read them. When no step can have changed a payload and every
// record of a group of batches is to be written, the engine calls
// WriteLines instead of Write with the batches' lines: each buffer holds
// the newline-terminated payloads of consecutive records, the bytes
// AppendLines would make of them, and the sink writes them in order. The
// contract is Write's; there is no record to refuse. A sink that writes
// envelopes (a DLQ's target) says so with WritesLines false.
type LineSink interface {
	Sink
	WriteLines(ctx context.Context, lines [][]byte) error
	WritesLines() bool
}

// BlockSource is a source that can hand the route whole blocks of lines
// (Batch.AddBlock): many lines in one batch, held in its arena as read,
// with no Record each. The route asks for them with PassBlocks, before
// Open, only when nothing would look at a record: no handler and no
// step at all, text or raw payloads nobody decodes, a LineSink writing
// lines as they are, no tap (see route.blocksPassThrough). A source that
// was asked may still return batches of records, for the lines a block
// does not take (blank, to trim, too long), but never a batch of both.
type BlockSource interface {
	Source
	PassBlocks()
}

// ReleasingSink is a sink that keeps no reference to a record, its
// payload or any value read from it once Write returns (nor do Sync or a
// later Write need them): what it needs of a record it has copied (a
// SQLite sink binds each value into its statement, which copies it; a
// PostgreSQL sink renders rows into buffers of its own). The engine may then reuse a delivered
// batch's records and payload arena for a later batch (passthrough.go)
// instead of allocating them again: a batch of 1024 records is ~200 KB of
// records and ~90 KB of payload, fresh memory the collector scans and the
// kernel maps page by page. A LineSink writing lines says so already.
type ReleasingSink interface {
	Sink
	ReleasesRecords() bool
}

// WriteSizer is a sink that says how many records it wants in one Write.
// The route then hands it groups of read batches of about that many
// records (at least one batch, at most 16) instead of its default, and
// queues as many in front of it. A sink that pipelines its writes inside
// (the kafka sink's partition lanes gather what concurrent writes hand
// them into each request) gains nothing from larger groups, and the
// batches queued for them are memory the kernel maps page by page: on a
// file → Kafka route of 500k records, groups of 16 batches of 4096 cost
// 0.84 µs of CPU a record and 153 MiB, groups of one 0.52 µs and 84 MiB.
type WriteSizer interface {
	Sink
	WriteSize() int
}

// CommitSyncSink is a sink that can leave making its writes durable to
// the route's commit (a file appending lines: one fsync per commit
// instead of one per write). Until the engine calls SyncOnCommit, it
// makes each write durable before Write returns, as every sink does.
// After it, Write may return once the bytes are written but not yet
// durable, and Sync makes every write that returned before it durable;
// the engine calls Sync in each commit after taking the acked position
// and before saving it, so a position is never committed past a record
// whose bytes could still be lost. An error from Sync is for good: the
// bytes it covered may be gone, so every later Sync returns it too.
type CommitSyncSink interface {
	Sink
	SyncOnCommit()
	Sync() error
}

// RegisterSink registers the sink of kind, the stdlib kind name: build
// gets the node's attributes decoded into a fresh C (fields tagged
// `attr:"name"`; the plan's value, or else the default stdlib declares).
// It panics when kind already has a sink. opts declare the premises the
// sink checks (ChecksPremises, ArmsPremises, HoldsPremises).
func RegisterSink[C any](kind string, build func(b *BuildEnv, cfg *C) (Sink, []*Program, error), opts ...RegisterOption) {
	registerSink(kind, func(b *buildEnv, cfg *C) (sink, []*program, error) {
		s, progs, err := build((*BuildEnv)(b), cfg)
		out := make([]*program, len(progs))
		for i, p := range progs {
			out[i] = (*program)(p)
		}
		return s, out, err
	}, opts...)
}

// A RegisterOption declares, with a registration, which of the premises a
// route's proof may rest on (plan.Premise) the end checks. The engine
// names no kind: a premise on a node whose kind declares no check for it
// refuses the route, since a verdict resting on an unchecked assumption
// is not a promise.
type RegisterOption func(*registration)

// ChecksPremises declares the start-up premise kinds the end checks
// before the first record: the engine finds the endpoint built from the
// premise's node, a PremiseTarget, and calls CheckPremise.
func ChecksPremises(kinds ...string) RegisterOption {
	return func(r *registration) { r.startupPremises = addKinds(r.startupPremises, kinds) }
}

// ArmsPremises declares the per-record premise kinds the sink enforces
// once armed: the engine finds the endpoint built from the premise's
// node, a RecordPremiseTarget, and calls ArmPremise.
func ArmsPremises(kinds ...string) RegisterOption {
	return func(r *registration) { r.armsPremises = addKinds(r.armsPremises, kinds) }
}

// HoldsPremises declares the per-record premise kinds the sink keeps by
// construction, with nothing to arm (a key or subject template fails a
// record whose ${…} has no value).
func HoldsPremises(kinds ...string) RegisterOption {
	return func(r *registration) { r.holdsPremises = addKinds(r.holdsPremises, kinds) }
}

func addKinds(m map[string]bool, kinds []string) map[string]bool {
	if m == nil {
		m = make(map[string]bool, len(kinds))
	}
	for _, k := range kinds {
		m[k] = true
	}
	return m
}

// BuildEnv is what a builder gets besides its config: the route being
// built, the node's attributes and the expression compiler.
type BuildEnv buildEnv

// Context is the build's context: a builder that connects to check its
// server bounds its wait with it.
func (b *BuildEnv) Context() context.Context { return b.ctx }

// Route is the name of the route being built.
func (b *BuildEnv) Route() string { return b.rt.name }

// Logger is the route's logger.
func (b *BuildEnv) Logger() *slog.Logger { return b.rt.log }

// NodeID is the ID of the plan node being built: premises name their
// node by it (see PremiseTarget).
func (b *BuildEnv) NodeID() string { return b.a.node.ID }

// BaseDir is the directory a relative file path in the node's attributes
// resolves against (the .mqb file's; "" for the working directory).
func (b *BuildEnv) BaseDir() string { return b.o.BaseDir }

// SourceFormat is how the route's payloads decode: "json", "text" or
// "raw", as its source reads them.
func (b *BuildEnv) SourceFormat() string { return b.rt.srcFormat }

// IsSet reports whether the node being built sets attribute attr: when it
// does not, its config field holds the default stdlib declares (so a
// deprecated spelling can yield to the current one only when that one was
// written).
func (b *BuildEnv) IsSet(attr string) bool {
	_, set := b.a.value(attr)
	return set
}

// Concurrency is how many batches of the route its sinks may be writing
// at once (the route's concurrency; 1 for a sink built on its own, by
// BuildSink). Above 1, records reach a sink in no fixed order across
// batches, so a sink may reorder the rows of a batch too (a database sink
// writes them in key order, so that two workers lock rows in one order).
func (b *BuildEnv) Concurrency() int { return max(b.rt.concurrency, 1) }

// DeadLetterTarget reports whether the sink being built is the target of
// a dlq step: it writes the records that failed, as they fail.
func (b *BuildEnv) DeadLetterTarget() bool { return b.dlq }

// Source is the route's source, built before its sinks (nil for a sink
// built on its own, by BuildSink). A sink that names what it writes by
// source position asks it whether it is Replayable, and its Name once
// open.
func (b *BuildEnv) Source() Source { return b.rt.src }

// Errorf is an error about attribute attr of the node being built, naming
// the route, the node and its position.
func (b *BuildEnv) Errorf(attr, format string, args ...any) error {
	return b.a.errorf(attr, format, args...)
}

// Compile compiles an expression against stdlib's environment (env()
// resolves through the run's Options.Env).
func (b *BuildEnv) Compile(src string) (*Program, error) {
	p, err := b.c.compile(src)
	return (*Program)(p), err
}

// Template compiles template attribute attr (a plain string is a template
// of one literal); nil, and no error, when the node does not set it.
func (b *BuildEnv) Template(attr string) (*Template, error) {
	t, err := compileTemplate(b.a, b.c, attr)
	return (*Template)(t), err
}

// RenderStatic renders template attribute attr, which may call env() but
// read no record (a connection url); a missing attr is an error.
func (b *BuildEnv) RenderStatic(attr string) (string, error) {
	return b.c.renderStatic(b.a, attr)
}

// Program is an expression compiled once per route.
type Program program

// UsesPayload reports whether the expression reads the payload.
func (p *Program) UsesPayload() bool { return p.usesPayload }

// UsesMessageID reports whether the expression reads message_id.
func (p *Program) UsesMessageID() bool { return p.usesMessageID }

// Expr is the expression's source text, as the plan holds it.
func (p *Program) Expr() string { return p.src }

// PayloadPath is the field path a plain payload.a.b expression reads
// (nil for any other expression).
func (p *Program) PayloadPath() []string { return p.payloadPath }

// MetaKey is the key a bare meta["k"] lookup (or message_id) reads; ok
// is false for any other expression.
func (p *Program) MetaKey() (key string, ok bool) { return p.metaKey, p.isMeta }

// MetaID is the metadata key of a record's identity (message_id).
const MetaID = metaID

// FieldProgram is a program reading payload.<field>, a top-level field:
// a sink that reads fields itself (with Record.Value) returns one per
// field from its builder, so the route decodes payloads for it.
func FieldProgram(field string) *Program {
	return &Program{src: "payload." + field, usesPayload: true, payloadPath: []string{field}}
}

// Evaluator runs programs; the zero value is ready. It is not safe for
// concurrent use: one per goroutine.
type Evaluator struct{ ev evaluator }

// Run evaluates p against r. present is false when p is a bare meta lookup
// of a key r does not have, or the value is null.
func (e *Evaluator) Run(p *Program, r *Record) (v any, present bool, err error) {
	return e.ev.run((*program)(p), r)
}

// Template is a template attribute compiled once: literal text and
// expressions rendered per record. It is safe for concurrent use.
type Template recordTemplate

// Parts are the template's parts as the plan holds them.
func (t *Template) Parts() []plan.Part { return t.parts }

// Programs are the template's expressions, one per expression part, in
// order.
func (t *Template) Programs() []*Program {
	out := make([]*Program, len(t.progs))
	for i, p := range t.progs {
		out[i] = (*Program)(p)
	}
	return out
}

// IsStatic reports whether the template has no expression: it renders
// the same text for every record.
func (t *Template) IsStatic() bool { return (*recordTemplate)(t).isStatic() }

// Render renders t for r (any record, nil included, when t is static). A
// placeholder with no value is an error: a partial render would give
// every such record the same key or address.
func (t *Template) Render(r *Record) (string, error) {
	return (*recordTemplate)(t).render(r)
}

// RenderWith renders like Render, passing each placeholder's value through
// rewrite with the placeholder's index and the text rendered before it
// (to escape a value for where it lands).
func (t *Template) RenderWith(r *Record, rewrite func(i int, prefix, v string) (string, error)) (string, error) {
	return (*recordTemplate)(t).renderWith(r, rewrite)
}

// Literal is the value a payload holds for a plan value that is not an
// expression (a string, number, bool, list or block).
func Literal(v plan.Value) (any, error) { return literal(v) }

// UnquoteIdent strips one layer of SQL identifier quotes ("x", `x`, [x])
// from a column name as a premise names it.
func UnquoteIdent(name string) string {
	if len(name) >= 2 {
		switch q := name[0]; {
		case (q == '"' || q == '`') && name[len(name)-1] == q:
			return strings.ReplaceAll(name[1:len(name)-1], string([]byte{q, q}), string(q))
		case q == '[' && name[len(name)-1] == ']':
			return name[1 : len(name)-1]
		}
	}
	return name
}

// Stringify renders an expression value as meta and keys hold it.
func Stringify(v any) (string, error) { return stringify(v) }

// Retryable marks err as one a new attempt can fix (nil stays nil).
func Retryable(err error) error { return retryable(err) }

// IsRetryable reports whether err, or one it wraps, was marked Retryable.
func IsRetryable(err error) bool { return isRetryable(err) }

// HeaderMessageID is the header that carries a record's message_id on
// the wire (its canonical UUID text), so a hop through another system
// keeps the record's identity.
const HeaderMessageID = headerMessageID

// ForwardedMeta returns the keys of r's metadata a sink forwards (every
// key outside the mqb.src.* provenance namespace), sorted.
func ForwardedMeta(r *Record) []string { return forwardedMeta(r) }

// CallResponder is a sink that answers differently as a request's call
// than as a plain `to` (the http sink, whose response becomes the
// payload): the request step calls RespondAsCall once, after building it.
type CallResponder interface {
	RespondAsCall()
}

// Refuse marks r as refused by the target on its own, for reason: the
// engine dead-letters it (see the contract above). An empty reason takes
// the mark back (a sink made of sinks that gathers its branches' reasons
// itself).
func (r *Record) Refuse(reason string) { r.sinkErr = reason }

// Refused is the reason r was refused in the last write ("" if it was not).
func (r *Record) Refused() string { return r.sinkErr }

// MessageUUID is r's message_id as a UUID, minted on first use as
// MessageID mints it.
func (r *Record) MessageUUID() uuid.UUID { return r.msgIDValue() }

// Value is r's decoded payload, what expressions see as payload: nil
// until the route decodes it, which it does when a program the route was
// built with reads the payload (see FieldProgram).
func (r *Record) Value() any { return r.payloadValue() }

// Field is the top-level field name of r's decoded payload, as
// Value().(map[string]any)[name] would give it (nil when absent or
// null), and whether the payload is an object at all. A record decoded
// into slots answers from its slot, building no map.
func (r *Record) Field(name string) (any, bool) {
	if r.slots != nil {
		if i, ok := r.slotTab.index[name]; ok {
			return r.slotValue(i + 1), true
		}
		return nil, true
	}
	m, ok := r.value.(map[string]any)
	if !ok {
		return nil, false
	}
	return m[name], true
}

// SetMeta sets r's metadata key k to v.
func (r *Record) SetMeta(k, v string) { r.setMeta(k, v) }

// EncodePayload brings r.Payload up to date with r's decoded value when a
// step changed it; a sink calls it before it reads r.Payload.
func (r *Record) EncodePayload() error { return encodePayload(r) }

// SetPayload replaces r's payload: raw is its bytes, value what
// expressions see (the decoded JSON, or the text).
func (r *Record) SetPayload(raw []byte, value any) {
	r.Payload, r.dirty = raw, false
	r.setValue(value)
}

// MarkDuplicate marks r as a repeat the sink skips: its position is in a
// part an earlier run wrote (name_by = source_position). The engine acks
// it and counts it as deduplicated.
func (r *Record) MarkDuplicate() { r.state = stDuplicate }

// PositionRuns sorts recs by partition and element position (source
// position, then the index among the elements unnest made of the record)
// and cuts them into runs of consecutive elements in one partition, each
// the records of one part (name_by = source_position; SpanOf names it).
// The runs share recs' backing array.
func PositionRuns(recs []*Record) [][]*Record { return positionRuns(recs) }

// PartitionRanges is a set of element positions per partition, kept as
// disjoint ranges: the spans the parts a sink found or wrote cover.
// Make one with PartitionRanges{}.
type PartitionRanges partitionRanges

// Contains reports whether r's element position is in the set.
func (pr PartitionRanges) Contains(r *Record) bool { return partitionRanges(pr).contains(r) }

// Add adds the elements of span s in partition part.
func (pr PartitionRanges) Add(part int32, s PartSpan) {
	partitionRanges(pr).add(part, s)
}

// RenamedPartSource is a source that can tell, from the source name in a
// part file's name, that the part holds its own input written under
// another route's name (the route renamed since, or another plan's route
// over the same input): its parts do not cover this route's names, so a
// positional sink would write every record again beside them.
type RenamedPartSource interface {
	PartsOfRoute(name string) (route string, ok bool)
}

// PartsOfAnotherRoute reports whether parts named with source name name
// hold src's input written by another route, and which (see
// RenamedPartSource); false for sources that cannot tell.
func PartsOfAnotherRoute(src Source, name string) (string, bool) {
	if r, ok := src.(RenamedPartSource); ok {
		return r.PartsOfRoute(name)
	}
	return "", false
}

// LegacyPartSource is a source whose positions may have been written
// under other names in part names (a file source's, from before part
// names carried the file's identity).
type LegacyPartSource interface {
	LegacyPartSources() []string
}

// LegacyPartSources are the other names src's positions may have been
// written under in part names (see LegacyPartSource): a sink listing its
// parts counts theirs as covering src's positions too. nil for most
// sources.
func LegacyPartSources(src Source) []string {
	if l, ok := src.(LegacyPartSource); ok {
		return l.LegacyPartSources()
	}
	return nil
}

// GuaranteeVerifier is a sink that checks at start-up, against its
// server, that it honours the route's planned guarantee (plan.EffectivelyOnce
// or plan.AtLeastOnce): an error refuses the route. The engine checks
// every one in the route's sink tree, inside a BranchingSink too.
type GuaranteeVerifier interface {
	VerifyGuarantee(guarantee string) error
}

// Sinks made of sinks. A structural output (switch, fanout, request; see
// connector/structural) is a sink whose plan node has branches: its
// builder builds each branch's endpoint with BuildBranch and its Write
// hands each branch the route's own records, so what a branch marks on
// them (Refuse, meta it tags) reaches the route as for any sink.

// Branches are the branches of the node being built, as the plan holds
// them: a switch's cases and default, a fanout's targets, a request's
// call and forward. Each Branch's Node is the endpoint, possibly a named
// one the compiler inlined (Node.Ref set).
func (b *BuildEnv) Branches() []plan.Branch { return b.a.node.Children }

// Pos is the position of the node being built in its .mqb file, for
// errors that name it.
func (b *BuildEnv) Pos() diag.Pos { return b.a.node.Pos }

// BuildBranch builds the endpoint of branch i (an index into Branches)
// from the registry, as the route builds its sink: recursively, so a
// branch may itself have branches, and as a DLQ's target when the node
// being built is one. The caller closes it; the programs are the
// branch's, for the builder to return with its own.
func (b *BuildEnv) BuildBranch(i int) (Sink, []*Program, error) {
	// A sink inside a branch is not the route's sink: the engine marks
	// only the route's own (RouteSinkMarker).
	rt := b.rt
	s, progs, err := rt.buildSink(b.ctx, nodeAttrs{route: rt.name, node: &b.a.node.Children[i].Node}, b.c, b.o, b.dlq)
	out := make([]*Program, len(progs))
	for j, p := range progs {
		out[j] = (*Program)(p)
	}
	return s, out, err
}

// BranchingSink is a sink made of sinks: Branches are the endpoints it
// built, each of which may branch again. The engine looks through them
// for the endpoint a premise names (PremiseTarget, RecordPremiseTarget)
// and for every GuaranteeVerifier, so a branching sink forwards neither
// itself; its Close closes its branches.
type BranchingSink interface {
	Sink
	Branches() []Sink
}

// UnmatchedCount counts the records a sink dropped because no branch
// takes them (a switch without default): they are acked and counted as
// delivered, and the count feeds the route's Unmatched stat and the
// mqb_records_unmatched_total metric. It is safe for concurrent use.
type UnmatchedCount struct {
	rt *route
	n  atomic.Int64
}

// UnmatchedCount is a new count of the route being built, for the sink
// being built to Add to as it writes. The route's Unmatched stat sums the
// counts of its sink, not those of its DLQ's target; the metric counts
// both.
func (b *BuildEnv) UnmatchedCount() *UnmatchedCount {
	c := &UnmatchedCount{rt: b.rt}
	if !b.dlq {
		b.rt.unmatched = append(b.rt.unmatched, c)
	}
	return c
}

// Add counts n more dropped records and returns c's total.
func (c *UnmatchedCount) Add(n int64) int64 {
	if m := c.rt.metrics; m != nil {
		m.unmatched.Add(float64(n))
	}
	return c.n.Add(n)
}

// PremiseTarget is a sink that checks start-up premises about itself
// (plan.Premise: what the compiler's proof assumes about the target, such
// as a unique index). Before the first record the engine finds the sink
// built from the premise's node, possibly inside a switch, fanout,
// request or handler, and calls CheckPremise; a failed premise refuses
// the route. Which kinds may check which premise is what their
// registrations declare (ChecksPremises).
type PremiseTarget interface {
	// PremiseNode is the ID of the plan node the sink was built from
	// (BuildEnv.NodeID).
	PremiseNode() string
	// CheckPremise checks p against the live system: nil when it holds,
	// a *PremiseFailure when it does not, another error when it could not
	// be checked.
	CheckPremise(ctx context.Context, p plan.Premise) error
}

// RecordPremiseTarget is a sink that enforces a per-record premise (a key
// that must be present) on every record it writes: ArmPremise accepts p,
// or says why this sink cannot enforce it.
type RecordPremiseTarget interface {
	PremiseNode() string
	ArmPremise(p plan.Premise) error
}

// PremiseFailure says why a premise does not hold and how to make it hold.
type PremiseFailure struct {
	Found string // what the live system has instead
	Fix   string // a statement or step that makes it hold
}

func (f *PremiseFailure) Error() string { return f.Found }

// BuildSink builds node's sink from the registry the way a route does,
// for a route named routeName whose payloads decode as srcFormat, under opts
// (its Logger, nil for none, and Env): a connector's tests drive one sink
// without running a route.
func BuildSink(ctx context.Context, routeName, srcFormat string, node *plan.Node, opts Options) (Sink, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := &route{name: routeName, log: log, srcFormat: srcFormat}
	b := &buildEnv{ctx: ctx, rt: rt, a: nodeAttrs{route: routeName, node: node}, c: &compiler{lookup: opts.Env}, o: &opts}
	s, _, err := rt.buildSinkOf(b)
	return s, err
}

// Registered is one registered end: its kind, its end (stdlib.EndSource
// or stdlib.EndSink), its config struct, the attributes that struct reads
// and the premise kinds it declared (ChecksPremises, ArmsPremises,
// HoldsPremises), sorted. The check that every connector agrees with
// stdlib reads these (connector/all's tests, which link every connector).
type Registered struct {
	Kind, End string
	Config    reflect.Type
	Attrs     []string

	ChecksPremises, ArmsPremises, HoldsPremises []string
}

// Registrations lists every registered end, by kind, the source first.
func Registrations() []Registered {
	var out []Registered
	for _, kind := range sortedKeys(registry.sources) {
		out = append(out, registered(kind, stdlib.EndSource, registry.sources[kind]))
	}
	for _, kind := range sortedKeys(registry.sinks) {
		out = append(out, registered(kind, stdlib.EndSink, registry.sinks[kind]))
	}
	slices.SortStableFunc(out, func(a, b Registered) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// Source is what a route reads from. The contract it keeps:
//
//   - The route's reader goroutine is the only caller of Next; Position
//     and Commit are called by the committer goroutine (or, for a
//     partition being revoked, by SourceHost.Revoke), one at a time, and
//     may run while Next is waiting.
//   - Each record carries its Partition (0 for a source that has one)
//     and, within it, a Seq that grows with every record read (a file's
//     record index, a Kafka offset; with SeqGaps, an offset that may skip
//     positions), and Next, the source offset just after it. The engine
//     acks records out of order, once each was written, dead-lettered,
//     filtered or found a repeat, and tracks acks per partition: only the
//     contiguous acked prefix of each partition is ever committed, so a
//     record's position is never committed before it was delivered or
//     dead-lettered.
//   - Commit is called only with positions already durable in the
//     checkpoint store (when the source keeps one there, see Position),
//     and with every dedup store synced: a consumer group commits its
//     offsets there, a JetStream consumer acks. After a crash, Open gets
//     the last position saved, which may be past the last one Commit was
//     handed (the route stopped between the two); whatever was read past
//     it is read again.
//   - A record the source cannot read as a record (a line too long, a
//     missing producer-stamped id the route's proof rests on) is still
//     handed out, marked with Record.DeadLetter, so its position is acked
//     with the others and the reason reaches the DLQ.
type Source interface {
	// Open positions the source at cp (haveCP false: nothing committed
	// yet). host lets a source whose partitions come and go (a consumer
	// group rebalancing) flush them. A source cancelled while waiting to
	// open returns nil; the route then sees ctx done and ends.
	Open(ctx context.Context, cp checkpoint.Position, haveCP bool, host SourceHost) error
	// Next reads the next batch, at most max records. eof is true when a
	// finite source has nothing more; an endless one returns an empty
	// batch when ctx is done.
	Next(ctx context.Context, max int) (b *Batch, eof bool, err error)
	// Position turns the committed positions of every partition into what
	// the checkpoint store keeps. ok false: the source keeps no checkpoint
	// of its own (its broker holds the position).
	Position(committed map[int32]AckPos) (pos checkpoint.Position, ok bool)
	// Commit hands the source the positions that moved since the last
	// commit, once they are durable in the checkpoint store: a consumer
	// group commits its offsets here, a JetStream consumer acks. An error
	// stops the route.
	Commit(ctx context.Context, changed map[int32]AckPos) error
	// Close releases the source's connections when the route is done.
	Close() error

	// Name is a short name safe in a part name (see SafeName).
	Name() string
	// Replayable reports whether a re-read yields the same records at the
	// same positions (name_by = source_position relies on it).
	Replayable() bool
	// RecordFormat is how payloads decode: json, text or raw.
	RecordFormat() string
	// SeqGaps reports whether Seq is an offset that may skip positions.
	SeqGaps() bool
}

// RegisterSource registers the source of kind, the stdlib kind name, as
// RegisterSink registers a sink. It panics when kind already has a source.
func RegisterSource[C any](kind string, build func(b *BuildEnv, cfg *C) (Source, error), opts ...RegisterOption) {
	registerSource(kind, func(b *buildEnv, cfg *C) (source, error) {
		return build((*BuildEnv)(b), cfg)
	}, opts...)
}

// SourceHost is what a route offers its source.
type SourceHost interface {
	// Revoke is called when partitions stop being the source's (a
	// rebalance): it waits up to wait for the records already read from
	// them to be acked, commits their contiguous acked position through
	// the source's Commit, and stops tracking them, so an ack arriving
	// later is ignored and nothing is committed for them twice.
	Revoke(parts []int32, wait time.Duration) error
}

// ResumingSource is a source that knows, once open, the committed
// position of its partitions: tracking starts there, and the route's
// Committed count with it.
type ResumingSource interface {
	ResumeAt() map[int32]AckPos
}

// FiniteSource is a source that may end: read to the end, its route
// stops by itself. Finite reports whether this one will.
type FiniteSource interface {
	Finite() bool
}

// WindowedSource is a source that receives at most AckWindow records not
// yet committed: an AMQP broker's prefetch, an MQTT session's receive
// maximum, or 1 for clients that each wait for their answer
// (http_server). At that many it receives nothing until a commit acks
// some. The route then commits once half the window is acked, as well as
// every CommitInterval, so a window smaller than what the route moves in
// an interval does not leave it idle.
type WindowedSource interface {
	AckWindow() int
}

// ProgressSource is a source that can tell how far through its input it is.
type ProgressSource interface {
	Progress() (read, size int64, ok bool)
}

// ProducerIDSource is a source that can tell a record whose producer
// stamped its id from one whose id it derived or minted: under a
// plan.PremiseProducerID premise the engine calls RequireProducerID
// before the first record, and from then on the source dead-letters
// every record without a producer-stamped id, with MissingProducerID's
// reason.
type ProducerIDSource interface {
	RequireProducerID(reason string)
}

// RecordPremiseSource is a source that checks a per-record or
// per-connection premise about what it reads (plan.PremiseIncreasingID,
// plan.PremiseSessionKept, plan.PremiseSlotKept) itself: the engine arms it before the first
// record, and the source stops the route, naming the premise, when a
// record or a connection breaks it.
type RecordPremiseSource interface {
	ArmPremise(p plan.Premise) error
}

// MissingProducerID is the reason a record without a producer-stamped id
// is dead-lettered under a producer-id premise: header names where the
// id would have been, reason is the premise's.
func MissingProducerID(header, reason string) string { return missingProducerID(header, reason) }

// AckPos is a committed position in one partition.
type AckPos struct {
	// Next is the Seq of the first record not committed: a file's next
	// record index, a Kafka partition's next offset.
	Next uint64
	// Offset is the source offset just after the last committed record
	// (a file's byte offset).
	Offset int64
	// Gen is the generation of the partition's assignment the position
	// was reached under: a source whose partitions move between consumers
	// commits only positions of the generation it holds.
	Gen uint32
}

// Batch is a run of consecutive records from one source, what Next
// returns.
type Batch struct {
	recs []Record
	// arena backs the payloads of recs, one allocation per batch.
	arena []byte
	// slots backs the records' decoded payload fields (payloadSlots),
	// kept for the batch's next use when it is reused.
	slots []any
	// cells boxes the values decoded into slots, their strings aliasing
	// arena, on a route whose batches are reused (payloadSlots.alias).
	cells jsonvalue.Cells
	// reserved lists the dedup keys reserved for the batch: promoted when
	// it is acked, released when it fails.
	reserved []reservation
	// seq numbers the batches a route reads, in order (see turnGate).
	seq uint64
	// spans are the runs its records were tracked in (partitionAcks.track).
	spans []ackSpan
	// copied counts the records AddCopy added: when it is all of them,
	// arena holds every record's line, in order.
	copied int
	// blockLines counts the lines AddBlock added: arena holds them as
	// read, with no Record each; blockFirst is the first one's Seq and
	// blockNext the source offset after the last. A batch holds a block
	// or records, never both.
	blockLines int
	blockFirst uint64
	blockNext  int64
	// pooled: made by NewBatchArena, so the route may hand it back to
	// freeBatches once acked.
	pooled bool
	// span is the batch's trace while it is in flight (tracing.go); nil
	// without tracing.
	span trace.Span
}

// NewBatch is an empty batch with room for n records.
func NewBatch(n int) *Batch { return &Batch{recs: freshRecords(n)} }

// NewBatchArena is an empty batch with room for n records and for
// arenaBytes of payload copied in by AddCopy. It may be one a route is
// done with (see freeBatches).
func NewBatchArena(n, arenaBytes int) *Batch {
	b := reusedBatch()
	if b == nil {
		b = &Batch{}
	}
	if cap(b.recs) < n {
		b.recs = freshRecords(n)
	}
	if cap(b.arena) < arenaBytes {
		// A quarter more than asked: the next batches of a source asking
		// about as much, a little more or less each time, take this
		// one's arena again once it is freed instead of a new one.
		b.arena = make([]byte, 0, arenaBytes+arenaBytes/4)
	}
	b.pooled = true
	return b
}

// AddCopy appends r, the next record read, with a copy of payload as its
// Payload: the copies of a batch share one allocation, its arena, so a
// source that reads into a buffer it reuses allocates once per batch.
// Each copy is followed by a newline in the arena (not in the Payload):
// a batch made only by AddCopy holds its records as lines, ready for a
// LineSink.
func (b *Batch) AddCopy(r Record, payload []byte) {
	start := len(b.arena)
	b.arena = append(b.arena, payload...)
	end := len(b.arena)
	b.arena = append(b.arena, '\n')
	r.Payload = b.arena[start:end:end]
	b.recs = append(b.recs, r)
	b.copied++
}

// AddLines appends records for the lines at the start of data, the next
// bytes read, as AddCopy would for each of them, with one copy for all:
// at most max records and maxBytes of arena in all. It stops before a
// line that has no newline in data, is longer than maxLen, starts with
// white space or a control byte, or ends in a carriage return: the
// source reads that one its own way (it may be blank, need trimming or
// be dead-lettered). The records are numbered from seq, and each one's
// Next is offset plus the bytes of data up to its newline's end. It
// returns how many records it added and how many bytes of data they took.
func (b *Batch) AddLines(data []byte, max, maxBytes, maxLen int, seq uint64, offset int64) (n, used int) {
	first := len(b.recs)
	maxBytes = min(maxBytes, len(data))
	for n < max {
		rest := data[used:maxBytes]
		i := bytes.IndexByte(rest, '\n')
		if i <= 0 || i > maxLen || rest[0] <= ' ' || rest[i-1] == '\r' {
			break
		}
		used += i + 1
		b.recs = append(b.recs, Record{Seq: seq + uint64(n), Next: offset + int64(used)})
		n++
	}
	if n == 0 {
		return 0, 0
	}
	base := len(b.arena) // where data[0] goes
	b.arena = append(b.arena, data[:used]...)
	start := base
	for i := range b.recs[first:] {
		r := &b.recs[first+i]
		end := base + int(r.Next-offset) - 1 // the newline's index in the arena
		r.Payload = b.arena[start:end:end]
		start = end + 1
	}
	b.copied += n
	return n, used
}

// AddBlock appends the lines at the start of data, the next bytes read,
// to b's block: the lines AddLines would take (the same stops), at most
// maxBytes of arena in all, copied whole into the arena with no Record
// each. The first line added to an empty batch is numbered seq and starts
// at offset; later calls must go on from where the last stopped. It
// returns how many lines it added and how many bytes of data they took.
// Only a source the route asked for blocks (BlockSource) calls it, and
// never on a batch holding records.
func (b *Batch) AddBlock(data []byte, maxBytes, maxLen int, seq uint64, offset int64) (n, used int) {
	maxBytes = min(maxBytes, len(data))
	for {
		rest := data[used:maxBytes]
		i := bytes.IndexByte(rest, '\n')
		if i <= 0 || i > maxLen || rest[0] <= ' ' || rest[i-1] == '\r' {
			break
		}
		used += i + 1
		n++
	}
	if n == 0 {
		return 0, 0
	}
	if b.blockLines == 0 {
		b.blockFirst = seq
	}
	if spare := b.arena[len(b.arena):cap(b.arena)]; len(spare) > 0 && &spare[0] == &data[0] {
		b.arena = b.arena[:len(b.arena)+used] // read into BlockSpace: in place already
	} else {
		b.arena = append(b.arena, data[:used]...)
	}
	b.blockLines += n
	b.blockNext = offset + int64(used)
	return n, used
}

// BlockSpace is the room left in b's arena, at most n bytes, for a
// source to read into and hand to AddBlock, which then takes the lines in
// place instead of copying them. The room is b's: what AddBlock leaves of
// it is overwritten by the next read or line added.
func (b *Batch) BlockSpace(n int) []byte {
	if cap(b.arena)-len(b.arena) < n {
		b.arena = slices.Grow(b.arena, n)
	}
	return b.arena[len(b.arena) : len(b.arena)+n]
}

// BlockLines is the number of lines AddBlock added to b.
func (b *Batch) BlockLines() int { return b.blockLines }

// Block is the lines AddBlock added to b, as read, each with its newline.
func (b *Batch) Block() []byte {
	if b.blockLines == 0 {
		return nil
	}
	return b.arena
}

// count is the number of lines b holds: its records or its block's.
func (b *Batch) count() int { return len(b.recs) + b.blockLines }

// PayloadBytes is the size of the payloads AddCopy copied into b, with
// their newlines: a source sizes the next batch's arena from it.
func (b *Batch) PayloadBytes() int { return len(b.arena) }

// MaxBatchBytes is the payload size at which a source that reads lines
// closes a batch early, so that a batch of long lines stays bounded
// whatever batch_size says.
const MaxBatchBytes = maxBatchBytes

// DLQSnippetBytes is how much of a record longer than max_record_bytes a
// source keeps for the DLQ, as its payload when it marks the record with
// DeadLetter.
const DLQSnippetBytes = dlqSnippetBytes

// Add appends r, the next record read, to b.
func (b *Batch) Add(r Record) { b.recs = append(b.recs, r) }

// Len is the number of records in b.
func (b *Batch) Len() int { return len(b.recs) }

// Records are b's records, in read order.
func (b *Batch) Records() []Record { return b.recs }

// SetMessageID gives r the identity id (one its producer stamped, or one
// derived from a stable source position) instead of the one minted on
// first use.
func (r *Record) SetMessageID(id uuid.UUID) { r.msgID, r.hasMsgID = id, true }

// SetGeneration records the generation of the partition's assignment r
// was read under (a consumer group's): the engine ignores an ack of r
// once the partition was revoked and assigned again, and AckPos.Gen
// carries the generation a committed position was reached under.
func (r *Record) SetGeneration(gen uint32) { r.gen = gen }

// DeadLetter marks r, as its source read it, as failed for good for
// reason: the engine sends it to the DLQ (or, with no dlq, stops the
// route before committing past it).
func (r *Record) DeadLetter(reason string) { r.kill(reason) }

// DeadLettered is the reason r was marked with DeadLetter ("" when it
// was not, or when a step since failed it otherwise).
func (r *Record) DeadLettered() string {
	if r.state != stDead {
		return ""
	}
	return r.reason
}

// MetaSourcePrefix is the metadata namespace of a record's provenance
// (mqb.src.subject, mqb.src.partition…): what a source sets when asked
// for its source_metadata, and what a sink does not forward.
const MetaSourcePrefix = metaSourcePrefix

// SafeName is s with every run of characters unsafe in a part name
// replaced by an underscore.
func SafeName(s string) string { return unsafeName().ReplaceAllString(s, "_") }

func registered(kind, end string, r registration) Registered {
	set := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	return Registered{Kind: kind, End: end, Config: r.config, Attrs: configAttrs(r.config),
		ChecksPremises: set(r.startupPremises), ArmsPremises: set(r.armsPremises), HoldsPremises: set(r.holdsPremises)}
}

// AppendLines appends recs to buf as lines, as a sink that writes lines
// (a file, standard output) writes them: each record's payload or, with
// envelope (the sink is a DLQ's target), the DLQ envelope {"error",
// "position", "meta", "payload" or "raw"} that says why it is there. A
// record that cannot be encoded gets no line and is marked with Refuse.
func AppendLines(buf []byte, recs []*Record, envelope bool) []byte {
	return appendLines(buf, recs, envelope)
}

// TrimByteOrderMark is line without the UTF-8 byte-order mark (EF BB BF)
// it may start with, unless format is raw, which keeps every byte. A
// source reading lines calls it on the first line of its input (a file,
// an object, stdin): some tools (Windows editors, spreadsheet exports)
// write the mark there, and it is not part of the record, as jq reads it.
func TrimByteOrderMark(line []byte, format string) []byte {
	if format == "raw" {
		return line
	}
	return bytes.TrimPrefix(line, utf8BOM)
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte-order mark.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// UTF8BOMFirstByte is the mark's first byte: a source that takes lines
// in bulk leaves the first one to TrimByteOrderMark when it starts so.
const UTF8BOMFirstByte = 0xEF

// Snippet is what a source keeps of a record longer than its
// max_record_bytes, as the payload it dead-letters it with: its first
// DLQSnippetBytes.
func Snippet(b []byte) []byte { return snippet(b) }

// What the engine asks of a connector beyond Sink and Source. Each is an
// interface a sink or source may implement (the engine asks "does this
// end implement X?") or an option its registration may pass; none names
// a kind, and an end that implements none of them is an ordinary one.
//
//   - RouteSinkMarker: a sink told it is the route's own sink, not a
//     branch nor a handler's.
//   - AbsorbCounter, with BuildEnv.AbsorbsElidedDedup: a sink whose
//     conflict clause stands in for a dedup the compiler elided counts
//     the repeats it absorbed.
//   - OutboxSink: a sink that commits the source's position in its own
//     write transaction.
//   - LegacyPartSource, CheckpointLocation: what a source needs to name
//     its parts and its state in messages.
//   - ListsOutputs, DescribesCheckpoint: what `mqbc state` shows of an
//     end without building it.
//   - PremiseTarget, RecordPremiseTarget, ProducerIDSource,
//     GuaranteeVerifier, BranchingSink, CallResponder: above.

// RouteSinkMarker is a sink that behaves differently as the route's own
// sink than as a branch of a structural output, a handler's endpoint or a
// DLQ's target: the engine calls MarkRouteSink once, after the route is
// built, on the sink built from the route's `to` (a part-file sink then
// counts a record an earlier run wrote as deduplicated; in a branch the
// record is the other branches' too, and keeps its state).
type RouteSinkMarker interface {
	MarkRouteSink()
}

// AbsorbsElidedDedup reports whether the node being built is the sink
// whose conflict clause stands in for a dedup the compiler elided
// (plan.Elision): such a sink counts the repeats it absorbs, and
// implements AbsorbCounter.
func (b *BuildEnv) AbsorbsElidedDedup() bool {
	return !b.dlq && b.rt.absorbedBy != "" && b.rt.absorbedBy == b.a.node.ID
}

// AbsorbCounter is a sink that counts the records its writes absorbed as
// repeats (an INSERT … ON CONFLICT DO NOTHING that inserted nothing): the
// engine takes the count after each write and counts them as
// deduplicated, not delivered.
type AbsorbCounter interface {
	TakeAbsorbed() int64
}

// OutboxSink is a sink that can commit the route's source position in
// its own write transaction (the transactional outbox: a batch's rows and
// the position past them land together or not at all). The engine calls
// WireOutbox once, after the route is built and before the source opens;
// the sink turns the outbox on when src is a source whose position it can
// commit (and tells src), and does nothing otherwise. It is not called
// behind a handler, whose sink writes elsewhere.
type OutboxSink interface {
	WireOutbox(ctx context.Context, src Source, route OutboxRoute) error
}

// OutboxRoute is what WireOutbox learns of the route.
type OutboxRoute struct {
	Name string
	Log  *slog.Logger
	// InOrder is true when batches reach the sink in read order
	// (concurrency = 1), which an outbox position needs.
	InOrder bool
}

// CheckpointLocation describes where host's checkpoint is kept, for a
// source's messages: a Pebble directory, or "the checkpoint_store
// server".
func CheckpointLocation(host SourceHost) string { return stateLocation(host) }

// ListsOutputs declares, with a sink's registration, the local files a
// sink of the kind writes, for `mqbc state`: list gets the node's config
// as the builder would (nothing is built or opened) and returns them.
func ListsOutputs[C any](list func(b *BuildEnv, cfg *C) []OutputState) RegisterOption {
	return func(r *registration) {
		r.outputs = func(b *buildEnv) []OutputState {
			cfg := new(C)
			if err := decodeConfig(b.a, cfg); err != nil {
				return nil
			}
			return list((*BuildEnv)(b), cfg)
		}
	}
}

// DescribesCheckpoint declares, with a source's registration, how `mqbc
// state` describes the source's committed position beyond Describe (the
// byte of which file, the file's identity).
func DescribesCheckpoint(describe func(pos checkpoint.Position) CheckpointDetail) RegisterOption {
	return func(r *registration) { r.describe = describe }
}

// CheckpointDetail is what a source says of its committed position.
type CheckpointDetail struct {
	// Detail says what the position is in ("byte 4410 of /data/in.jsonl").
	Detail string
	// File and Identity are the file the position is in and which file
	// it was (device, inode, fingerprint), for a source that reads files.
	File, Identity string
}
