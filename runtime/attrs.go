package runtime

import (
	"fmt"

	"github.com/mqb-dev/mqb/plan"
)

// nodeAttrs reads a node's resolved attributes, naming the route, node and
// attribute in every error.
type nodeAttrs struct {
	route string
	node  *plan.Node
}

func (a nodeAttrs) errorf(attr, format string, args ...any) error {
	return fmt.Errorf("route %s: %s %s (%s) attribute %s: %s", a.route, a.node.Role, a.node.Kind, a.node.Pos, attr, fmt.Sprintf(format, args...))
}

func (a nodeAttrs) value(name string) (plan.Value, bool) {
	v, ok := a.node.Attrs[name]
	return v, ok
}

func (a nodeAttrs) str(name, def string) string {
	if v, ok := a.value(name); ok {
		if v.Str != "" || v.Type == plan.TString || v.Type == plan.TEnum {
			return v.Str
		}
		if v.Type == plan.TTemplate && len(v.Template) == 1 && v.Template[0].Expr == "" {
			return v.Template[0].Lit
		}
	}
	return def
}

// template returns a TTemplate (or a plain string) attribute as parts.
func (a nodeAttrs) template(name string) ([]plan.Part, bool) {
	v, ok := a.value(name)
	if !ok {
		return nil, false
	}
	if v.Type == plan.TTemplate || len(v.Template) > 0 {
		return v.Template, true
	}
	return []plan.Part{{Lit: v.Str}}, true
}
