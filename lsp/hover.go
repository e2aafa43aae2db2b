package lsp

import (
	"fmt"
	"strings"

	"go.lsp.dev/protocol"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// keywordDocs documents the statement keywords that are not stdlib entries.
var keywordDocs = map[string]string{
	"route":     "A route moves records from one `from` source through its steps (in data-flow order) to one `to` sink. `mqbc build` proves its delivery guarantee.",
	"output":    "A named endpoint, used from a route as `to ref NAME`.",
	"input":     "A named source endpoint, used from a route as `from ref NAME`.",
	"from":      "The route's source: `from <kind> { … }` or `from ref NAME`. Exactly one per route.",
	"to":        "A sink: `to <kind> { … }` or `to ref NAME`. Exactly one per route; inside dlq, case, default and fanout, the nested target.",
	"handle":    "A handler endpoint the record passes through before the output side; steps after it are on the output side.",
	"call":      "request: the endpoint called with each record; its response is forwarded.",
	"forward":   "request: where the response (or, on error, the original record) goes.",
	"case":      "switch: `case \"value\" { to … }` receives records whose `on` equals the value.",
	"default":   "switch: receives records matching no case. Without it they are dropped (and counted).",
	"ref":       "Uses a named endpoint declared with `output NAME = kind { … }` (or `input`).",
	"del":       "map: `del payload.tmp` deletes a payload field (at any depth: `del payload.a.b`), `del meta[\"k\"]` a metadata key; deleting what is not there does nothing.",
	"guarantee": "Declares the delivery guarantee the route must have: the build fails unless the checker proves it. `effectively_once` also accepts an exactly-once route (a sql cursor source and sql sink on one database, committed through the transactional outbox).",
}

// hover answers a hover at byte offset off of d: the word's documentation
// (or its route's verdict), followed by the explanation of any diagnostic
// code reported there.
func (s *server) hover(d *document, off int) *protocol.Hover {
	var parts []string
	var r *protocol.Range
	if b, st, i := d.outline.tokenAt(off); st != nil && st.toks[i].Type == lang.TIdent {
		if md := s.hoverText(d, b, st, i); md != "" {
			t := st.toks[i]
			rng := d.span(t.Pos.Offset, tokEnd(t))
			parts, r = append(parts, md), &rng
		}
	}
	parts = append(parts, codeDocs(d, off)...)
	if len(parts) == 0 {
		return nil
	}
	return &protocol.Hover{
		Contents: protocol.MarkupContent{Kind: protocol.Markdown, Value: strings.Join(parts, "\n---\n\n")},
		Range:    r,
	}
}

// codeDocs explains, from diag.Codes, each distinct code of the
// diagnostics whose range holds off.
func codeDocs(d *document, off int) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range d.diags {
		if seen[x.Code] || off < x.Range.Start.Offset || off > max(x.Range.End.Offset, x.Range.Start.Offset+1) {
			continue
		}
		seen[x.Code] = true
		if doc, ok := diag.Lookup(x.Code); ok {
			out = append(out, fmt.Sprintf("**%s** %s\n\n%s\n", doc.Code, doc.Title, doc.Doc))
		}
	}
	return out
}

func (s *server) hoverText(d *document, b *block, st *stmt, i int) string {
	word := st.toks[i].Value
	key := st.key()
	switch {
	// `route NAME`, and the route's `guarantee …` line: the verdict.
	case b.role == roleTop && key == "route" && i <= 1:
		return routeVerdict(d, st.word(1))
	case b.role == roleRoute && key == "guarantee":
		return routeVerdict(d, b.name)

	// `ref NAME`: the declaration it names.
	case i >= 1 && st.toks[i-1].Value == "ref":
		if loc, ne := s.findEndpoint(word); ne != nil {
			kind := ""
			if ne.Kind != nil {
				kind = ne.Kind.Name
			}
			return fmt.Sprintf("```mqb\n%s %s = %s { … }\n```\n\ndeclared in %s", ne.Dir, word, kind, loc.URI)
		}
		return ""

	// The kind after from/to/…, or in `output NAME = kind`.
	case i >= 1 && endpointKeywords[st.word(i-1)],
		b.role == roleTop && (key == "output" || key == "input") && i == 3:
		if k, ok := stdlib.LookupKind(word); ok {
			return kindDoc(k)
		}
		return ""

	// The value after `name =`: its attribute's doc (enum values, booleans).
	case i == 2 && st.toks[1].Value == "=":
		if a := b.attr(key); a != nil {
			return attrDoc(a)
		}
		return ""

	case i != 0:
		return ""
	}

	// The statement's first word.
	if a := b.attr(word); a != nil {
		return attrDoc(a)
	}
	if b.role == roleRoute {
		if step, ok := stdlib.LookupStep(word); ok {
			return stepDoc(step)
		}
	}
	if doc, ok := keywordDocs[word]; ok {
		return fmt.Sprintf("**%s**\n\n%s", word, doc)
	}
	return ""
}

// routeVerdict renders the compiled verdict of the route named name.
func routeVerdict(d *document, name string) string {
	for _, r := range d.routes {
		if r.Name == name {
			md := verdictMarkdown(r)
			if n := routeErrors(d, name); n > 0 {
				md += fmt.Sprintf("\n_The route has %d error(s); this verdict is what the checker could prove so far._\n", n)
			}
			return md
		}
	}
	return fmt.Sprintf("**route %s**\n\nNo verdict: the route does not compile (see its diagnostics).", name)
}

func verdictMarkdown(r plan.Route) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**route %s**: %s\n", r.Name, r.Guarantee)
	fmt.Fprintf(&b, "\n_Ladder: exactly-once > effectively-once > at-least-once > at-most-once; the verdict is the weakest over the route's effects._\n")
	if len(r.Reasons) > 0 {
		b.WriteString("\n")
		for _, reason := range r.Reasons {
			fmt.Fprintf(&b, "- %s\n", reason)
		}
	}
	if len(r.Premises) > 0 {
		b.WriteString("\nPremises (what the proof assumes):\n")
		for _, p := range r.Premises {
			fmt.Fprintf(&b, "- %s\n", strings.TrimPrefix(compiler.PremiseLine(p), "  premise: "))
		}
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\nWarnings:\n")
		for _, w := range r.Warnings {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	return b.String()
}

func kindDoc(k *stdlib.Kind) string {
	var roles []string
	if k.Source {
		roles = append(roles, "source")
	}
	if k.Sink {
		roles = append(roles, "sink")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** (endpoint kind: %s)\n\n%s\n", k.Name, strings.Join(roles, ", "), k.Doc)
	if k.IDNote != "" {
		fmt.Fprintf(&b, "\n%s\n", k.IDNote)
	}
	if len(k.Attrs) > 0 {
		names := make([]string, len(k.Attrs))
		for i, a := range k.Attrs {
			names[i] = "`" + a.Name + "`"
		}
		fmt.Fprintf(&b, "\nAttributes: %s\n", strings.Join(names, ", "))
	}
	return b.String()
}

func stepDoc(st *stdlib.Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** (step, %s side)\n\n%s\n", st.Name, sideName(st.Side), st.Doc)
	if len(st.Attrs) > 0 {
		names := make([]string, len(st.Attrs))
		for i, a := range st.Attrs {
			names[i] = "`" + a.Name + "`"
		}
		fmt.Fprintf(&b, "\nAttributes: %s\n", strings.Join(names, ", "))
	}
	return b.String()
}

func sideName(s stdlib.Side) string {
	switch s {
	case stdlib.InputOnly:
		return "input-only"
	case stdlib.OutputOnly:
		return "output-only"
	}
	return "either"
}

// attrDoc renders an attribute's documentation, type, default and whether
// it is required.
func attrDoc(a *stdlib.Attr) string {
	var b strings.Builder
	typ := string(a.Type)
	switch {
	case a.Type == stdlib.Enum:
		typ = strings.Join(a.Enum, " | ")
	case a.Type == stdlib.List && a.Elem != "":
		typ = "list of " + string(a.Elem)
	}
	fmt.Fprintf(&b, "**%s**: %s", a.Name, typ)
	if a.Required {
		b.WriteString(" (required)")
	}
	b.WriteString("\n\n")
	b.WriteString(a.Doc)
	b.WriteString("\n")
	if a.Default != nil {
		fmt.Fprintf(&b, "\nDefault: `%v`\n", a.Default)
	}
	if a.Deprecated != "" {
		fmt.Fprintf(&b, "\nDeprecated: use `%s`.\n", a.Deprecated)
	}
	return b.String()
}

// routeErrors counts the errors reported inside the route named name.
func routeErrors(d *document, name string) int {
	n := 0
	for _, decl := range d.file.Decls {
		r := decl.Route
		if r == nil || r.Name == nil || r.Name.Name != name {
			continue
		}
		for _, x := range d.diags {
			if x.Severity == diag.Error && x.Range.Start.Offset >= r.Pos.Offset && x.Range.Start.Offset < r.EndPos.Offset {
				n++
			}
		}
	}
	return n
}
