package runtime

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// A connector's configuration is a Go struct whose fields name stdlib
// attributes in an `attr` tag:
//
//	type fileSourceConfig struct {
//		Path string        `attr:"path"`
//		Mode string        `attr:"mode"`
//		Poll time.Duration `attr:"poll_interval"`
//	}
//
// decodeConfig fills it from a plan node: the value the plan carries, or
// else the default stdlib declares — the only place a default is written.
// Field types: string (a string, an enum, a template without placeholders,
// an expression's source), []plan.Part (a template), int, int64, float64,
// bool, time.Duration, []string, plan.Value (as the plan has it) and
// *plan.Value (nil when the plan has no value and stdlib no default).
// Embedded structs are decoded in place, for attributes several kinds share.

// attrDecls returns the stdlib declarations of a node's attributes.
func attrDecls(n *plan.Node) ([]stdlib.Attr, error) {
	if n.Role == plan.RoleStep {
		if s, ok := stdlib.LookupStep(n.Kind); ok {
			return s.Attrs, nil
		}
		return nil, fmt.Errorf("step %s is not declared in stdlib", n.Kind)
	}
	if k, ok := stdlib.LookupKind(n.Kind); ok {
		return k.Attrs, nil
	}
	return nil, fmt.Errorf("kind %s is not declared in stdlib", n.Kind)
}

// decodeConfig fills the struct dst points to from a's node (see above).
func decodeConfig(a nodeAttrs, dst any) error {
	decls, err := attrDecls(a.node)
	if err != nil {
		return fmt.Errorf("route %s: %s (%s): %w", a.route, a.node.Kind, a.node.Pos, err)
	}
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("decodeConfig: %T is not a pointer to a struct", dst))
	}
	return decodeStruct(a, decls, rv.Elem())
}

func decodeStruct(a nodeAttrs, decls []stdlib.Attr, sv reflect.Value) error {
	st := sv.Type()
	for i := range st.NumField() {
		f := st.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			if err := decodeStruct(a, decls, sv.Field(i)); err != nil {
				return err
			}
			continue
		}
		name, ok := f.Tag.Lookup("attr")
		if !ok || name == "-" {
			continue
		}
		d := slices.IndexFunc(decls, func(d stdlib.Attr) bool { return d.Name == name })
		if d < 0 {
			// A programming error the declaration test catches.
			return a.errorf(name, "the runtime reads it but stdlib does not declare it on %s", a.node.Kind)
		}
		if err := decodeField(a, &decls[d], sv.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

func decodeField(a nodeAttrs, d *stdlib.Attr, fv reflect.Value) error {
	v, ok := a.value(d.Name)
	if !ok && d.Default != nil {
		v, ok = defaultValue(d), true
	}
	if fv.Type() == reflect.TypeFor[*plan.Value]() {
		if ok {
			fv.Set(reflect.ValueOf(&v))
		}
		return nil
	}
	if !ok {
		if d.Required {
			return a.errorf(d.Name, "required")
		}
		return nil // the zero value: not set, no default
	}
	if d.Type == stdlib.Enum && v.Str != "" && !slices.Contains(d.Enum, v.Str) {
		return a.errorf(d.Name, "unknown value %q (one of %s)", v.Str, strings.Join(d.Enum, ", "))
	}
	switch fv.Interface().(type) {
	case plan.Value:
		fv.Set(reflect.ValueOf(v))
	case []plan.Part:
		if v.Type == plan.TTemplate || len(v.Template) > 0 {
			fv.Set(reflect.ValueOf(v.Template))
		} else {
			fv.Set(reflect.ValueOf([]plan.Part{{Lit: v.Str}}))
		}
	case string:
		switch {
		case v.Type == plan.TExpr:
			fv.SetString(v.Expr)
		case d.Type == stdlib.Expr && len(v.Template) == 1 && v.Template[0].Expr != "":
			fv.SetString(v.Template[0].Expr) // ${…} where an expression is due
		case v.Type == plan.TTemplate || len(v.Template) > 0:
			var b strings.Builder
			for _, p := range v.Template {
				if p.Expr != "" {
					return a.errorf(d.Name, "${%s}: this attribute takes no placeholders", p.Expr)
				}
				b.WriteString(p.Lit)
			}
			fv.SetString(b.String())
		default:
			fv.SetString(v.Str)
		}
	case time.Duration:
		switch {
		case v.Int != 0:
			fv.SetInt(v.Int)
		case v.Str != "":
			dur, err := time.ParseDuration(v.Str)
			if err != nil {
				return a.errorf(d.Name, "%v", err)
			}
			fv.SetInt(int64(dur))
		}
	case int, int64:
		fv.SetInt(v.Int)
	case float64:
		if v.Type == plan.TInt {
			fv.SetFloat(float64(v.Int))
		} else {
			fv.SetFloat(v.Float)
		}
	case bool:
		fv.SetBool(v.Bool)
	case []string:
		var out []string
		for _, e := range v.List {
			out = append(out, e.Str)
		}
		fv.Set(reflect.ValueOf(out))
	default:
		panic(fmt.Sprintf("decodeConfig: attribute %s: unsupported field type %s", d.Name, fv.Type()))
	}
	return nil
}

// defaultValue is a declaration's default as the plan would carry it.
func defaultValue(d *stdlib.Attr) plan.Value {
	switch x := d.Default.(type) {
	case string:
		switch d.Type {
		case stdlib.Duration:
			dur, _ := time.ParseDuration(x) // stdlib's own test parses every default
			return plan.Value{Type: plan.TDuration, Str: x, Int: int64(dur)}
		case stdlib.Enum:
			return plan.Value{Type: plan.TEnum, Str: x}
		case stdlib.Expr:
			return plan.Value{Type: plan.TExpr, Expr: x}
		}
		return plan.Value{Type: plan.TString, Str: x}
	case int64:
		return plan.Value{Type: plan.TInt, Int: x}
	case int:
		return plan.Value{Type: plan.TInt, Int: int64(x)}
	case float64:
		return plan.Value{Type: plan.TFloat, Float: x}
	case bool:
		return plan.Value{Type: plan.TBool, Bool: x}
	}
	panic(fmt.Sprintf("stdlib attribute %s: default of type %T", d.Name, d.Default))
}

// configAttrs lists the attribute names a config struct type reads,
// embedded structs included (for the declaration test).
func configAttrs(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, configAttrs(f.Type)...)
			continue
		}
		if name, ok := f.Tag.Lookup("attr"); ok && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
