package runtime

// The connector API: what a connector package outside runtime (see
// connector/) builds a sink with. This file is the whole of it. The
// engine's own code keeps its unexported names: sink, premiseTarget and
// the like are aliases of the interfaces here, and Program, Template and
// BuildEnv are defined on the engine's program, recordTemplate and
// buildEnv, so converting between the two names costs nothing.
//
// A connector package registers its kind in init:
//
//	func init() {
//		runtime.RegisterSink("http", func(b *runtime.BuildEnv, cfg *config) (runtime.Sink, []*runtime.Program, error) {
//			…
//		})
//	}
//
// and is linked into a binary by a blank import (connector/all imports
// every one), as database/sql drivers are. The contract a sink keeps:
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

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// Sink writes batches of live records; see the contract above.
type Sink interface {
	Write(ctx context.Context, recs []*Record) error
	Close() error
}

// RegisterSink registers the sink of kind, the stdlib kind name: build
// gets the node's attributes decoded into a fresh C (fields tagged
// `attr:"name"`; the plan's value, or else the default stdlib declares).
// It panics when kind already has a sink.
func RegisterSink[C any](kind string, build func(b *BuildEnv, cfg *C) (Sink, []*Program, error)) {
	registerSink(kind, func(b *buildEnv, cfg *C) (sink, []*program, error) {
		s, progs, err := build((*BuildEnv)(b), cfg)
		out := make([]*program, len(progs))
		for i, p := range progs {
			out[i] = (*program)(p)
		}
		return s, out, err
	})
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

// SourceFormat is how the route's payloads decode: "json", "text" or
// "raw", as its source reads them.
func (b *BuildEnv) SourceFormat() string { return b.rt.srcFormat }

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
func UnquoteIdent(name string) string { return unquoteIdent(name) }

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
// engine dead-letters it (see the contract above).
func (r *Record) Refuse(reason string) { r.sinkErr = reason }

// Refused is the reason r was refused in the last write ("" if it was not).
func (r *Record) Refused() string { return r.sinkErr }

// MessageUUID is r's message_id as a UUID, minted on first use as
// MessageID mints it.
func (r *Record) MessageUUID() uuid.UUID { return r.msgIDValue() }

// Value is r's decoded payload, what expressions see as payload: nil
// until the route decodes it, which it does when a program the route was
// built with reads the payload (see FieldProgram).
func (r *Record) Value() any { return r.value }

// SetMeta sets r's metadata key k to v.
func (r *Record) SetMeta(k, v string) { r.setMeta(k, v) }

// EncodePayload brings r.Payload up to date with r's decoded value when a
// step changed it; a sink calls it before it reads r.Payload.
func (r *Record) EncodePayload() error { return encodePayload(r) }

// SetPayload replaces r's payload: raw is its bytes, value what
// expressions see (the decoded JSON, or the text).
func (r *Record) SetPayload(raw []byte, value any) {
	r.Payload, r.dirty, r.value = raw, false, value
}

// GuaranteeVerifier is a sink that checks at start-up, against its
// server, that it honours the route's planned guarantee (plan.EffectivelyOnce
// or plan.AtLeastOnce): an error refuses the route.
type GuaranteeVerifier interface {
	VerifyGuarantee(guarantee string) error
}

// PremiseTarget is a sink that checks start-up premises about itself
// (plan.Premise: what the compiler's proof assumes about the target, such
// as a unique index). Before the first record the engine finds the sink
// built from the premise's node, possibly inside a switch, fanout,
// request or handler, and calls CheckPremise; a failed premise refuses
// the route. Which kinds may check which premise is the engine's
// allow-list (premise.go).
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
// or stdlib.EndSink), its config struct and the attributes that struct
// reads. The check that every connector agrees with stdlib reads these
// (connector/all's tests, which link every connector).
type Registered struct {
	Kind, End string
	Config    reflect.Type
	Attrs     []string
}

// Registrations lists every registered end, by kind, the source first.
func Registrations() []Registered {
	var out []Registered
	for _, kind := range sortedKeys(registry.sources) {
		c := registry.sources[kind].config
		out = append(out, Registered{Kind: kind, End: stdlib.EndSource, Config: c, Attrs: configAttrs(c)})
	}
	for _, kind := range sortedKeys(registry.sinks) {
		c := registry.sinks[kind].config
		out = append(out, Registered{Kind: kind, End: stdlib.EndSink, Config: c, Attrs: configAttrs(c)})
	}
	slices.SortStableFunc(out, func(a, b Registered) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}
