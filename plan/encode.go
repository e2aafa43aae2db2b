package plan

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/internal/jsonquote"
)

// The compact plan is written by the hand: encoding/json finds a route's
// encoders by reflection, sorts each attribute map through reflected
// values and allocates a copy of every map value it visits, which was a
// tenth of a 10,000-route build's CPU and some 50 MB of its allocations.
// The bytes are json.Marshal's (TestAppendRouteMatchesMarshal holds them
// to it, and a field added to a plan type fails TestEncodedFieldCounts
// until it is written here too): fields in declaration order, omitempty
// as encoding/json reads it, map keys sorted, strings escaped with its
// HTML-safe escaping and floats as it formats them.

// appendRoute appends r as json.Marshal encodes it.
func appendRoute(b []byte, r *Route) ([]byte, error) {
	var err error
	b = append(b, `{"name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"guarantee":`...)
	b = appendString(b, r.Guarantee)
	b = append(b, `,"reasons":`...)
	b = appendStrings(b, r.Reasons)
	if len(r.Warnings) > 0 {
		b = append(b, `,"warnings":`...)
		b = appendStrings(b, r.Warnings)
	}
	if len(r.Premises) > 0 {
		b = append(b, `,"premises":[`...)
		for i := range r.Premises {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPremise(b, &r.Premises[i])
		}
		b = append(b, ']')
	}
	if len(r.Elided) > 0 {
		b = append(b, `,"elided":[`...)
		for i := range r.Elided {
			if i > 0 {
				b = append(b, ',')
			}
			e := &r.Elided[i]
			b = append(b, `{"kind":`...)
			b = appendString(b, e.Kind)
			b = append(b, `,"key":`...)
			b = appendString(b, e.Key)
			b = append(b, `,"by":`...)
			b = appendString(b, e.By)
			b = append(b, `,"why":`...)
			b = appendString(b, e.Why)
			b = append(b, `,"pos":`...)
			b = appendPos(b, e.Pos)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"concurrency":`...)
	b = strconv.AppendInt(b, int64(r.Concurrency), 10)
	b = append(b, `,"batch_size":`...)
	b = strconv.AppendInt(b, int64(r.BatchSize), 10)
	b = append(b, `,"nodes":`...)
	if r.Nodes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendNode(b, &r.Nodes[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"edges":`...)
	if r.Edges == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, e := range r.Edges {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"from":`...)
			b = appendString(b, e.From)
			b = append(b, `,"to":`...)
			b = appendString(b, e.To)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"pos":`...)
	b = appendPos(b, r.Pos)
	return append(b, '}'), nil
}

func appendPremise(b []byte, p *Premise) []byte {
	b = append(b, `{"kind":`...)
	b = appendString(b, p.Kind)
	b = append(b, `,"when":`...)
	b = appendString(b, p.When)
	b = append(b, `,"node":`...)
	b = appendString(b, p.Node)
	if p.Target != "" {
		b = append(b, `,"target":`...)
		b = appendString(b, p.Target)
	}
	if len(p.Columns) > 0 {
		b = append(b, `,"columns":`...)
		b = appendStrings(b, p.Columns)
	}
	if len(p.Key) > 0 {
		b = append(b, `,"key":`...)
		b = appendStrings(b, p.Key)
	}
	b = append(b, `,"holds":`...)
	b = appendString(b, p.Holds)
	b = append(b, `,"reason":`...)
	b = appendString(b, p.Reason)
	b = append(b, `,"pos":`...)
	b = appendPos(b, p.Pos)
	return append(b, '}')
}

func appendNode(b []byte, n *Node) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = appendString(b, n.ID)
	b = append(b, `,"role":`...)
	b = appendString(b, n.Role)
	b = append(b, `,"kind":`...)
	b = appendString(b, n.Kind)
	b = append(b, `,"side":`...)
	b = appendString(b, n.Side)
	if n.Ref != "" {
		b = append(b, `,"ref":`...)
		b = appendString(b, n.Ref)
	}
	if len(n.Attrs) > 0 {
		b = append(b, `,"attrs":`...)
		if b, err = appendValueMap(b, n.Attrs); err != nil {
			return b, err
		}
	}
	if n.Expr != "" {
		b = append(b, `,"expr":`...)
		b = appendString(b, n.Expr)
	}
	if len(n.Assign) > 0 {
		b = append(b, `,"assign":[`...)
		for i := range n.Assign {
			if i > 0 {
				b = append(b, ',')
			}
			a := &n.Assign[i]
			b = append(b, `{"target":`...)
			b = appendString(b, a.Target)
			if len(a.Path) > 0 {
				b = append(b, `,"path":`...)
				b = appendStrings(b, a.Path)
			}
			if a.Delete {
				b = append(b, `,"delete":true`...)
			}
			if a.Value != nil {
				b = append(b, `,"value":`...)
				if b, err = appendValue(b, a.Value); err != nil {
					return b, err
				}
			}
			b = append(b, `,"pos":`...)
			b = appendPos(b, a.Pos)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(n.Children) > 0 {
		b = append(b, `,"children":[`...)
		for i := range n.Children {
			if i > 0 {
				b = append(b, ',')
			}
			c := &n.Children[i]
			b = append(b, `{"label":`...)
			b = appendString(b, c.Label)
			if c.Match != "" {
				b = append(b, `,"match":`...)
				b = appendString(b, c.Match)
			}
			b = append(b, `,"node":`...)
			if b, err = appendNode(b, &c.Node); err != nil {
				return b, err
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"pos":`...)
	b = appendPos(b, n.Pos)
	return append(b, '}'), nil
}

// appendValueMap appends m with its keys sorted, as encoding/json does.
func appendValueMap(b []byte, m map[string]Value) ([]byte, error) {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		v := m[k]
		var err error
		if b, err = appendValue(b, &v); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v *Value) ([]byte, error) {
	var err error
	b = append(b, `{"type":`...)
	b = appendString(b, v.Type)
	if v.Str != "" {
		b = append(b, `,"str":`...)
		b = appendString(b, v.Str)
	}
	if v.Int != 0 {
		b = append(b, `,"int":`...)
		b = strconv.AppendInt(b, v.Int, 10)
	}
	if v.Float != 0 {
		b = append(b, `,"float":`...)
		if b, err = appendFloat(b, v.Float); err != nil {
			return b, err
		}
	}
	if v.Bool {
		b = append(b, `,"bool":true`...)
	}
	if len(v.List) > 0 {
		b = append(b, `,"list":[`...)
		for i := range v.List {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, &v.List[i]); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	if len(v.Block) > 0 {
		b = append(b, `,"block":`...)
		if b, err = appendValueMap(b, v.Block); err != nil {
			return b, err
		}
	}
	if v.Expr != "" {
		b = append(b, `,"expr":`...)
		b = appendString(b, v.Expr)
	}
	if len(v.Template) > 0 {
		b = append(b, `,"template":[`...)
		for i, p := range v.Template {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if p.Lit != "" {
				b = append(b, `"lit":`...)
				b = appendString(b, p.Lit)
			}
			if p.Expr != "" {
				if p.Lit != "" {
					b = append(b, ',')
				}
				b = append(b, `"expr":`...)
				b = appendString(b, p.Expr)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if v.Stable {
		b = append(b, `,"stable":true`...)
	}
	if v.Secret {
		b = append(b, `,"secret":true`...)
	}
	b = append(b, `,"pos":`...)
	b = appendPos(b, v.Pos)
	return append(b, '}'), nil
}

func appendPos(b []byte, p diag.Pos) []byte {
	b = append(b, '{')
	if p.File != "" {
		b = append(b, `"file":`...)
		b = appendString(b, p.File)
		b = append(b, ',')
	}
	b = append(b, `"line":`...)
	b = strconv.AppendInt(b, int64(p.Line), 10)
	b = append(b, `,"col":`...)
	b = strconv.AppendInt(b, int64(p.Col), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(p.Offset), 10)
	return append(b, '}')
}

// appendStrings appends s as a JSON array, null when nil.
func appendStrings(b []byte, s []string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, x := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, x)
	}
	return append(b, ']')
}

// appendFloat formats f as encoding/json does (ES6 number formatting);
// like it, it refuses NaN and the infinities.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 is written e-9.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendString appends s quoted as encoding/json quotes it by default.
func appendString(b []byte, s string) []byte { return jsonquote.Append(b, s) }
