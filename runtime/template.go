package runtime

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/mqb-dev/mqb/plan"
)

// headerMessageID carries the record's message_id on broker sinks, so that
// an mqb (or mq-bridge) → broker → mqb hop keeps its identity. The value is
// the UUID's canonical 36-character text form (the same text NATS gets in
// Nats-Msg-Id); a reader should also accept 16 raw bytes.
const headerMessageID = "mq_bridge.message_id"

// metaSourcePrefix is the provenance namespace a publisher does not forward:
// it describes the hop a record arrived on, not the record.
const metaSourcePrefix = "mqb.src."

// recordTemplate is a template attribute compiled once: literal text and
// expressions rendered per record.
type recordTemplate struct {
	attr   string
	parts  []plan.Part
	progs  []*program // one per expression part, in order
	static string     // the text when there is no expression
	evals  sync.Pool
}

func compileTemplate(a nodeAttrs, c *compiler, name string) (*recordTemplate, error) {
	parts, ok := a.template(name)
	if !ok {
		return nil, nil
	}
	return compileTemplateParts(a, c, name, parts)
}

// compileTemplateParts compiles attribute name's parts, as a config
// struct's []plan.Part field holds them; nil parts (the attribute unset)
// give a nil template.
func compileTemplateParts(a nodeAttrs, c *compiler, name string, parts []plan.Part) (*recordTemplate, error) {
	if parts == nil {
		return nil, nil
	}
	t := &recordTemplate{attr: name, parts: parts}
	t.evals.New = func() any { return new(evaluator) }
	var static strings.Builder
	for _, p := range parts {
		if p.Expr == "" {
			static.WriteString(p.Lit)
			continue
		}
		prog, err := c.compile(p.Expr)
		if err != nil {
			return nil, a.errorf(name, "${%s}: %v", p.Expr, err)
		}
		t.progs = append(t.progs, prog)
	}
	t.static = static.String()
	return t, nil
}

func (t *recordTemplate) isStatic() bool { return len(t.progs) == 0 }

// render renders t for r. A placeholder with no value fails the record: a
// partial render would give every such record the same key or subject.
func (t *recordTemplate) render(r *Record) (string, error) {
	return t.renderWith(r, nil)
}

// renderWith renders like render; when rewrite is set, each placeholder's
// value passes through it with the placeholder's index and the text
// rendered so far (the http sink escapes values for their place in a url).
func (t *recordTemplate) renderWith(r *Record, rewrite func(i int, prefix, v string) (string, error)) (string, error) {
	if t.isStatic() {
		return t.static, nil
	}
	ev := t.evals.Get().(*evaluator)
	defer t.evals.Put(ev)
	var b strings.Builder
	i := 0
	for _, p := range t.parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
			continue
		}
		prog := t.progs[i]
		i++
		v, present, err := ev.run(prog, r)
		if err != nil {
			return "", fmt.Errorf("%s: %w", t.attr, err)
		}
		if !present {
			return "", fmt.Errorf("%s: ${%s} has no value", t.attr, prog.src)
		}
		s, err := stringify(v)
		if err != nil {
			return "", fmt.Errorf("%s: ${%s}: %w", t.attr, prog.src, err)
		}
		if rewrite != nil {
			if s, err = rewrite(i-1, b.String(), s); err != nil {
				return "", fmt.Errorf("%s: ${%s}: %w", t.attr, prog.src, err)
			}
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// forwardedMeta returns r's metadata a publisher forwards as headers (every
// key outside mqb.src.*), sorted by key.
func forwardedMeta(r *Record) []string {
	keys := make([]string, 0, len(r.Meta))
	for k := range r.Meta {
		if !strings.HasPrefix(k, metaSourcePrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
