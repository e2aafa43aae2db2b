package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/stdlib"
)

// program is one expression compiled once per route. The commonest shapes —
// `payload.a.b` and `meta["k"]` — are also recognised and evaluated
// directly, skipping the VM; anything else runs in expr-lang.
type program struct {
	src  string
	prog *vm.Program
	// usesPayload / usesMessageID say which parts of the record the
	// expression can read, so a route decodes payloads and mints ids only
	// when something needs them.
	usesPayload   bool
	usesMessageID bool

	payloadPath []string // fast path: payload.a.b
	// slot is payload.a's slot (1-based; 0: none) in a route that decodes
	// payloads into slots (slots.go).
	slot    int
	metaKey string // fast path: meta["k"]
	isMeta  bool
}

var (
	payloadPathRE = lazyre.New(`^payload((?:\.[A-Za-z_][A-Za-z0-9_]*)+)$`)
	metaIndexRE   = lazyre.New(`^meta\["((?:[^"\\])*)"\]$`)
	metaDotRE     = lazyre.New(`^meta\.([A-Za-z_][A-Za-z0-9_]*)$`)
	identRE       = lazyre.New(`[A-Za-z_][A-Za-z0-9_]*`)
)

// compileProgram compiles src against stdlib's environment.
func compileProgram(src string, lookup stdlib.EnvLookup) (*program, error) {
	src = strings.TrimSpace(src)
	opts := append(stdlib.ExprOptions(lookup), strictString)
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, err
	}
	p := &program{src: src, prog: prog}
	for _, id := range identRE().FindAllString(stripStrings(src), -1) {
		switch id {
		case "payload":
			p.usesPayload = true
		case "message_id":
			p.usesMessageID = true
		}
	}
	if m := payloadPathRE().FindStringSubmatch(src); m != nil {
		p.payloadPath = strings.Split(m[1][1:], ".")
	} else if m := metaIndexRE().FindStringSubmatch(src); m != nil {
		p.metaKey, p.isMeta = m[1], true
	} else if m := metaDotRE().FindStringSubmatch(src); m != nil {
		p.metaKey, p.isMeta = m[1], true
	}
	return p, nil
}

// strictString replaces expr-lang's string(): string(nil) is an error, not
// "<nil>". The compiler writes a template such as "ord-${payload.id}" as
// "ord-" + string(payload.id); a record without that field would otherwise
// get the key "ord-<nil>", shared by every such record, and thousands of
// records would collapse into one row. An error fails the record instead
// (to the DLQ, with this reason).
var strictString = expr.Function("string", func(params ...any) (any, error) {
	if params[0] == nil {
		return nil, errNilString
	}
	return fmt.Sprintf("%v", params[0]), nil
}, new(func(any) string))

var errNilString = errors.New("a value is missing or null, and string() never renders it as \"<nil>\" (check the field name, or give it a default: string(payload.x ?? \"none\"))")

// stripStrings blanks string literals so identifiers inside them (meta["payload"])
// are not mistaken for references.
func stripStrings(s string) string {
	b := []byte(s)
	var quote byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case quote != 0 && c == '\\':
			b[i] = ' '
			if i+1 < len(b) {
				i++
				b[i] = ' '
			}
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			b[i] = ' '
		case c == '"' || c == '\'' || c == '`':
			quote = c
		}
	}
	return string(b)
}

// evaluator runs programs; one per worker goroutine (it reuses a VM).
type evaluator struct {
	vm vm.VM
}

// run evaluates p against r. present is false when p is a bare meta lookup
// of a key the record does not have — a missing identity, which callers
// treat differently from an empty string.
func (e *evaluator) run(p *program, r *Record) (v any, present bool, err error) {
	if p.isMeta {
		v, ok := r.metaValue(p.metaKey)
		return v, ok, nil
	}
	if p.payloadPath != nil {
		root, path := r.value, p.payloadPath
		if r.slots != nil {
			if p.slot > 0 {
				root, path = r.slotValue(p.slot), path[1:]
			} else {
				root = r.payloadValue()
			}
		}
		if v, ok := walkPath(root, path); ok {
			return v, v != nil, nil
		}
	}
	env := stdlib.Env{Payload: r.payloadValue(), Meta: r.metaView()}
	if p.usesMessageID {
		env.MessageID = r.MessageID()
	}
	out, err := e.vm.Run(p.prog, env)
	if err != nil {
		return nil, false, fmt.Errorf("evaluate %s: %w", p.src, err)
	}
	return out, out != nil, nil
}

// runString is run followed by stringify, without boxing a meta value in
// an interface on the way (the dedup key of most routes is meta["mqb.id"]:
// one allocation a record spared).
func (e *evaluator) runString(p *program, r *Record) (s string, present bool, err error) {
	if p.isMeta {
		s, ok := r.metaGet(p.metaKey)
		return s, ok, nil
	}
	v, present, err := e.run(p, r)
	if err != nil {
		return "", false, err
	}
	s, err = stringify(v)
	return s, present, err
}

// walkPath follows a field path through decoded JSON objects. ok is false
// when a step is not an object, leaving the error to expr-lang.
func walkPath(v any, path []string) (any, bool) {
	for _, k := range path {
		m, isMap := v.(map[string]any)
		if !isMap {
			if v == nil {
				return nil, true
			}
			return nil, false
		}
		v = m[k]
	}
	return v, true
}

// stringify renders an expression value as meta and dedup keys hold it.
func stringify(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case json.Number:
		return string(x), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "", nil
	case fmt.Stringer:
		return x.String(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("cannot render %T as a string: %w", v, err)
	}
	return string(b), nil
}
