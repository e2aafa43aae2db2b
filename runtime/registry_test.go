package runtime

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

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
			node: node("file", plan.RoleSource, map[string]plan.Value{"path": plantest.Str("in.jsonl")}),
			dst:  &cfg{},
			want: &cfg{Path: "in.jsonl", Mode: "consume", Max: 16 << 20, Store: "pebble://.mqb/state", Parts: []plan.Part{{Lit: "in.jsonl"}}},
		},
		{
			name: "a placeholder where none is allowed",
			node: node("file", plan.RoleSource, map[string]plan.Value{
				"path": plantest.Tmpl(plantest.Lit("a-"), plantest.Ex("payload.x")), "mode": plantest.Enum("subscribe"), "max_record_bytes": plantest.Int(7),
				"idempotency": {Type: plan.TBool, Bool: true},
			}),
			dst:     &cfg{},
			wantErr: "${payload.x}: this attribute takes no placeholders",
		},
		{
			name: "template parts and a raw value",
			node: node("file", plan.RoleSink, map[string]plan.Value{
				"mode": plantest.Enum("subscribe"), "max_record_bytes": plantest.Int(7), "path": plantest.Str("p"),
				"idempotency": {Type: plan.TBool, Bool: true},
			}),
			dst:  &cfg{},
			want: &cfg{Path: "p", Mode: "subscribe", Max: 7, Store: "pebble://.mqb/state", Parts: []plan.Part{{Lit: "p"}}, Raw: &plan.Value{Type: plan.TBool, Bool: true}},
		},
		{
			name:    "an enum value stdlib does not declare",
			node:    node("file", plan.RoleSource, map[string]plan.Value{"path": plantest.Str("p"), "mode": plantest.Enum("tail")}),
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
			node: node("dedup", plan.RoleStep, map[string]plan.Value{"ttl": {Type: plan.TDuration, Str: "90s", Int: int64(90 * time.Second)}, "key": plantest.Expr("payload.id")}),
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
