package runtime

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// buildEnv is what a connector's builder gets besides its config: the
// route being built (its name, logger, source), the raw node attributes
// (for what a config struct cannot say, such as whether an attribute was
// written at all), the expression compiler and the run's options.
type buildEnv struct {
	ctx context.Context
	rt  *route
	a   nodeAttrs
	c   *compiler
	o   *Options
	// dlq is true when the sink being built is a DLQ's target.
	dlq bool
}

// registration is one kind's source or sink builder, and the premises
// the end it builds checks (see RegisterOption).
type registration struct {
	config reflect.Type // the config struct the builder decodes
	source func(b *buildEnv) (source, error)
	sink   func(b *buildEnv) (sink, []*program, error)

	// startupPremises are the start-up premise kinds the end checks
	// (through PremiseTarget); armsPremises the per-record ones it
	// enforces once armed (through RecordPremiseTarget); holdsPremises
	// the per-record ones a sink keeps by construction, with nothing to arm.
	startupPremises, armsPremises, holdsPremises map[string]bool

	// outputs lists the local files a sink of the kind writes
	// (ListsOutputs); describe describes a source's checkpoint
	// (DescribesCheckpoint). nil when the kind declared none.
	outputs  func(b *buildEnv) []OutputState
	describe func(pos checkpoint.Position) CheckpointDetail
}

// with applies opts to r.
func (r registration) with(opts []RegisterOption) registration {
	for _, o := range opts {
		o(&r)
	}
	return r
}

// registry holds every kind's source and sink builders, keyed by the
// stdlib kind name. Each connector's file registers its own in an init
// function; nothing else names a kind.
var registry = struct {
	sources map[string]registration
	sinks   map[string]registration
}{sources: map[string]registration{}, sinks: map[string]registration{}}

// registerSource registers the source of kind: build gets the node's
// attributes decoded into a fresh C (see decodeConfig); opts declare the
// premises it checks.
func registerSource[C any](kind string, build func(b *buildEnv, cfg *C) (source, error), opts ...RegisterOption) {
	if _, dup := registry.sources[kind]; dup {
		panic("runtime: source " + kind + " registered twice")
	}
	registry.sources[kind] = registration{
		config: reflect.TypeFor[C](),
		source: func(b *buildEnv) (source, error) {
			cfg := new(C)
			if err := decodeConfig(b.a, cfg); err != nil {
				return nil, err
			}
			return build(b, cfg)
		},
	}.with(opts)
}

// registerSink registers the sink of kind, as registerSource does. The
// programs it returns are the expressions the sink evaluates per record
// (they decide which payload fields a route decodes).
func registerSink[C any](kind string, build func(b *buildEnv, cfg *C) (sink, []*program, error), opts ...RegisterOption) {
	if _, dup := registry.sinks[kind]; dup {
		panic("runtime: sink " + kind + " registered twice")
	}
	registry.sinks[kind] = registration{
		config: reflect.TypeFor[C](),
		sink: func(b *buildEnv) (sink, []*program, error) {
			cfg := new(C)
			if err := decodeConfig(b.a, cfg); err != nil {
				return nil, nil, err
			}
			s, progs, err := build(b, cfg)
			if err != nil {
				return nil, nil, err
			}
			return s, progs, nil
		},
	}.with(opts)
}

// checksAtStartup reports whether an end of kind declared that it checks
// start-up premises of kind premise (ChecksPremises).
func checksAtStartup(kind, premise string) bool {
	return registry.sources[kind].startupPremises[premise] || registry.sinks[kind].startupPremises[premise]
}

// sourceKinds and sinkKinds list the registered kinds, sorted.
func sourceKinds() []string { return sortedKeys(registry.sources) }
func sinkKinds() []string   { return sortedKeys(registry.sinks) }

func sortedKeys(m map[string]registration) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// buildSourceOf builds the source of a's kind from the registry.
func (rt *route) buildSourceOf(b *buildEnv) (source, error) {
	reg, ok := registry.sources[b.a.node.Kind]
	if !ok {
		return nil, fmt.Errorf("route %s: from %s (%s): this runtime cannot read from %s (it reads from %s)",
			rt.name, b.a.node.Kind, b.a.node.Pos, b.a.node.Kind, strings.Join(sourceKinds(), ", "))
	}
	return reg.source(b)
}

// buildSinkOf builds the sink of a's kind from the registry.
func (rt *route) buildSinkOf(b *buildEnv) (sink, []*program, error) {
	reg, ok := registry.sinks[b.a.node.Kind]
	if !ok {
		return nil, nil, fmt.Errorf("route %s: to %s (%s): this runtime cannot write to %s (it writes to %s)",
			rt.name, b.a.node.Kind, b.a.node.Pos, b.a.node.Kind, strings.Join(sinkKinds(), ", "))
	}
	return reg.sink(b)
}
