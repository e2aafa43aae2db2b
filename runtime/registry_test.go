package runtime

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// Every kind stdlib declares as a source or sink has a builder, and every
// builder's config struct agrees with stdlib: each field names a declared
// attribute, and the source and sink configs of a kind together read every
// attribute it declares. Defaults live only in stdlib (decodeConfig
// applies them), so a connector cannot drift from the documentation.
func TestRegistryAgreesWithStdlib(t *testing.T) {
	for _, name := range stdlib.KindNames() {
		k, _ := stdlib.LookupKind(name)
		src, hasSrc := registry.sources[name]
		snk, hasSink := registry.sinks[name]
		// stdlib's Unimplemented is the list of declared ends without a
		// builder; an end in it that has one is a stale note.
		runsSrc := k.Source && k.Unimplemented[stdlib.EndSource] == ""
		runsSink := k.Sink && k.Unimplemented[stdlib.EndSink] == ""
		if runsSrc != hasSrc {
			t.Errorf("%s: stdlib says the source runs: %v, the registry has a source builder: %v", name, runsSrc, hasSrc)
		}
		if runsSink != hasSink {
			t.Errorf("%s: stdlib says the sink runs: %v, the registry has a sink builder: %v", name, runsSink, hasSink)
		}
		// Each end's config reads exactly the attributes that apply to
		// that end: one it skips would be accepted by the compiler and
		// ignored at run time.
		ends := []struct {
			end string
			reg registration
			has bool
		}{{stdlib.EndSource, src, hasSrc}, {stdlib.EndSink, snk, hasSink}}
		for _, e := range ends {
			if !e.has {
				continue
			}
			read := map[string]bool{}
			for _, attr := range configAttrs(e.reg.config) {
				a := k.Attr(attr)
				switch {
				case a == nil:
					t.Errorf("%s: config %s reads %q, which stdlib does not declare", name, e.reg.config, attr)
				case a.End != "" && a.End != e.end:
					t.Errorf("%s %s: config %s reads %q, which stdlib declares for the %s only", name, e.end, e.reg.config, attr, a.End)
				}
				read[attr] = true
			}
			for _, a := range k.Attrs {
				if (a.End == "" || a.End == e.end) && !read[a.Name] {
					t.Errorf("%s %s: stdlib declares %q for it, but its config %s does not read it (declare End: the other end, or read it)", name, e.end, a.Name, e.reg.config)
				}
			}
		}
		for _, a := range k.Attrs {
			if a.End == stdlib.EndSource && !k.Source || a.End == stdlib.EndSink && !k.Sink {
				t.Errorf("%s: %q is declared for the %s, which the kind does not have", name, a.Name, a.End)
			}
		}
	}
	for kind := range registry.sources {
		if k, ok := stdlib.LookupKind(kind); !ok || !k.Source {
			t.Errorf("source %s is registered but stdlib declares no such source", kind)
		}
	}
	for kind := range registry.sinks {
		if k, ok := stdlib.LookupKind(kind); !ok || !k.Sink {
			t.Errorf("sink %s is registered but stdlib declares no such sink", kind)
		}
	}
}

func TestDecodeConfig(t *testing.T) {
	type cfg struct {
		Path  string        `attr:"path"`
		Mode  string        `attr:"mode"`
		Max   int64         `attr:"max_record_bytes"`
		Store string        `attr:"checkpoint_store"`
		Parts []plan.Part   `attr:"path"`
		Raw   *plan.Value   `attr:"idempotency"`
		Dur   time.Duration `attr:"-"` // no such attribute: untagged fields are skipped
	}
	type dedupCfg struct {
		Key string        `attr:"key"`
		TTL time.Duration `attr:"ttl"`
	}
	node := func(kind, role string, attrs map[string]plan.Value) *plan.Node {
		return &plan.Node{ID: "n1", Kind: kind, Role: role, Attrs: attrs}
	}
	tests := []struct {
		name    string
		node    *plan.Node
		dst     any
		want    any
		wantErr string
	}{
		{
			name: "defaults from stdlib",
			node: node("file", plan.RoleSource, map[string]plan.Value{"path": strV("in.jsonl")}),
			dst:  &cfg{},
			want: &cfg{Path: "in.jsonl", Mode: "consume", Max: 16 << 20, Store: "pebble://.mqb/state", Parts: []plan.Part{{Lit: "in.jsonl"}}},
		},
		{
			name: "a placeholder where none is allowed",
			node: node("file", plan.RoleSource, map[string]plan.Value{
				"path": tmplV(lit("a-"), ex("payload.x")), "mode": enumV("subscribe"), "max_record_bytes": intV(7),
				"idempotency": {Type: plan.TBool, Bool: true},
			}),
			dst:     &cfg{},
			wantErr: "${payload.x}: this attribute takes no placeholders",
		},
		{
			name: "template parts and a raw value",
			node: node("file", plan.RoleSink, map[string]plan.Value{
				"mode": enumV("subscribe"), "max_record_bytes": intV(7), "path": strV("p"),
				"idempotency": {Type: plan.TBool, Bool: true},
			}),
			dst:  &cfg{},
			want: &cfg{Path: "p", Mode: "subscribe", Max: 7, Store: "pebble://.mqb/state", Parts: []plan.Part{{Lit: "p"}}, Raw: &plan.Value{Type: plan.TBool, Bool: true}},
		},
		{
			name:    "an enum value stdlib does not declare",
			node:    node("file", plan.RoleSource, map[string]plan.Value{"path": strV("p"), "mode": enumV("tail")}),
			dst:     &cfg{},
			wantErr: `attribute mode: unknown value "tail" (one of consume, subscribe, group_subscribe)`,
		},
		{
			name:    "a required attribute missing",
			node:    node("file", plan.RoleSource, map[string]plan.Value{}),
			dst:     &cfg{},
			wantErr: "attribute path: required",
		},
		{
			name: "a step's defaults: an expression and a duration",
			node: node("dedup", plan.RoleStep, map[string]plan.Value{}),
			dst:  &dedupCfg{},
			want: &dedupCfg{Key: "message_id", TTL: 24 * time.Hour},
		},
		{
			name: "a duration written in the plan",
			node: node("dedup", plan.RoleStep, map[string]plan.Value{"ttl": {Type: plan.TDuration, Str: "90s", Int: int64(90 * time.Second)}, "key": exprV("payload.id")}),
			dst:  &dedupCfg{},
			want: &dedupCfg{Key: "payload.id", TTL: 90 * time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeConfig(nodeAttrs{route: "r", node: tc.node}, tc.dst)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tc.dst, tc.want) {
				t.Errorf("got  %+v\nwant %+v", tc.dst, tc.want)
			}
		})
	}
}

// Each stdlib default has the Go type its attribute's type asks for, so
// decodeConfig can apply it.
func TestStdlibDefaultsDecode(t *testing.T) {
	check := func(owner string, attrs []stdlib.Attr) {
		for i := range attrs {
			d := &attrs[i]
			if d.Default == nil {
				continue
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s.%s: %v", owner, d.Name, r)
					}
				}()
				v := defaultValue(d)
				if d.Type == stdlib.Duration && v.Int == 0 {
					t.Errorf("%s.%s: default %v is not a duration", owner, d.Name, d.Default)
				}
				if d.Type == stdlib.Enum && !slices.Contains(d.Enum, v.Str) {
					t.Errorf("%s.%s: default %q is not one of %v", owner, d.Name, v.Str, d.Enum)
				}
			}()
		}
	}
	for _, name := range stdlib.KindNames() {
		k, _ := stdlib.LookupKind(name)
		check(name, k.Attrs)
	}
	for _, name := range stdlib.StepNames() {
		s, _ := stdlib.LookupStep(name)
		check(name, s.Attrs)
	}
}
