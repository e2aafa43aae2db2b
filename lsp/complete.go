package lsp

import (
	"go.lsp.dev/protocol"

	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/stdlib"
)

// complete answers a completion at byte offset off of d from the outline:
// what may be written depends on the block the cursor is in and on the
// words already written on its statement.
func (s *server) complete(d *document, off int) []protocol.CompletionItem {
	if d.outline.inComment(off) {
		return []protocol.CompletionItem{}
	}
	b := d.outline.innermost(off)
	st := b.stmtAt(off)
	var before []lang.Token
	if st != nil {
		for _, t := range st.toks {
			if t.Pos.Offset < off {
				before = append(before, t)
			}
		}
	}
	// The word under the cursor is the prefix being typed: the client
	// filters by it, and the context is what comes before it.
	if n := len(before); n > 0 && tokEnd(before[n-1]) >= off {
		if before[n-1].Type != lang.TIdent {
			return []protocol.CompletionItem{} // inside a string or number
		}
		before = before[:n-1]
	}
	var items []protocol.CompletionItem
	if len(before) == 0 {
		items = keyItems(b, st)
	} else {
		items = s.valueItems(b, before)
	}
	if items == nil {
		items = []protocol.CompletionItem{}
	}
	return items
}

// keyItems lists what may start a statement in b: keywords, steps, the
// attributes and settings not set yet.
func keyItems(b *block, typing *stmt) []protocol.CompletionItem {
	set := b.keysSet(typing)
	var items []protocol.CompletionItem
	keyword := func(name string) {
		items = append(items, protocol.CompletionItem{
			Label: name, Kind: protocol.CompletionItemKindKeyword, SortText: "1" + name,
			Documentation: markdown(keywordDocs[name]),
		})
	}
	attrs := func(as []stdlib.Attr) {
		for i := range as {
			if a := &as[i]; !set[a.Name] {
				items = append(items, attrItem(a))
			}
		}
	}
	switch b.role {
	case roleTop:
		keyword("route")
		keyword("output")
		keyword("input")
	case roleRoute:
		if !set["guarantee"] {
			keyword("guarantee")
		}
		attrs(stdlib.Settings)
		for _, k := range []string{"from", "handle", "to"} {
			if !set[k] {
				keyword(k)
			}
		}
		for i := range stdlib.Steps {
			st := &stdlib.Steps[i]
			items = append(items, protocol.CompletionItem{
				Label: st.Name, Kind: protocol.CompletionItemKindFunction, SortText: "2" + st.Name,
				Detail: "step (" + sideName(st.Side) + ")", Documentation: markdown(st.Doc),
			})
		}
	case roleKind:
		if b.kind != nil {
			attrs(b.kind.Attrs)
		}
		switch b.name {
		case "switch":
			keyword("case")
			if !set["default"] {
				keyword("default")
			}
		case "request":
			for _, k := range []string{"call", "forward"} {
				if !set[k] {
					keyword(k)
				}
			}
		case "fanout":
			keyword("to")
		}
	case roleStep:
		if b.step != nil {
			attrs(b.step.Attrs)
		}
	case roleBranch:
		if !set["to"] {
			keyword("to")
		}
	}
	return items
}

// valueItems lists what may follow the words already written on a
// statement: a kind after from/to/…, an endpoint name after ref, an enum
// value after `name =`, a guarantee.
func (s *server) valueItems(b *block, before []lang.Token) []protocol.CompletionItem {
	first := before[0].Value
	switch {
	case len(before) == 1 && endpointKeywords[first]:
		items := kindItems(first == "from")
		return append(items, protocol.CompletionItem{
			Label: "ref", Kind: protocol.CompletionItemKindKeyword, SortText: "2ref",
			Documentation: markdown(keywordDocs["ref"]),
		})
	case len(before) == 3 && b.role == roleTop && (first == "output" || first == "input") && before[2].Value == "=":
		return kindItems(first == "input")
	case len(before) == 1 && first == "guarantee" && b.role == roleRoute:
		return enumItems(stdlib.Guarantees, keywordDocs["guarantee"])
	case len(before) == 2 && before[1].Value == "ref":
		return s.endpointItems()
	case len(before) == 2 && before[1].Value == "=":
		a := b.attr(first)
		switch {
		case a == nil:
		case a.Type == stdlib.Enum:
			return enumItems(a.Enum, a.Doc)
		case a.Type == stdlib.Bool:
			return enumItems([]string{"true", "false"}, a.Doc)
		}
	}
	return nil
}

func kindItems(sources bool) []protocol.CompletionItem {
	var items []protocol.CompletionItem
	for i := range stdlib.Kinds {
		k := &stdlib.Kinds[i]
		if sources && !k.Source || !sources && !k.Sink {
			continue
		}
		items = append(items, protocol.CompletionItem{
			Label: k.Name, Kind: protocol.CompletionItemKindClass, SortText: "1" + k.Name,
			Detail: "endpoint kind", Documentation: markdown(kindDoc(k)),
		})
	}
	return items
}

func enumItems(values []string, doc string) []protocol.CompletionItem {
	items := make([]protocol.CompletionItem, 0, len(values))
	for _, v := range values {
		items = append(items, protocol.CompletionItem{
			Label: v, Kind: protocol.CompletionItemKindEnumMember, Documentation: markdown(doc),
		})
	}
	return items
}

func attrItem(a *stdlib.Attr) protocol.CompletionItem {
	detail := string(a.Type)
	if a.Required {
		detail += ", required"
	}
	return protocol.CompletionItem{
		Label: a.Name, Kind: protocol.CompletionItemKindProperty, SortText: "0" + a.Name,
		Detail: detail, Documentation: markdown(attrDoc(a)), InsertText: a.Name + " = ",
		Deprecated: a.Deprecated != "",
	}
}

// endpointItems lists the named endpoints of every open document.
func (s *server) endpointItems() []protocol.CompletionItem {
	var items []protocol.CompletionItem
	seen := map[string]bool{}
	for _, u := range s.sortedURIs() {
		for _, decl := range s.docs[u].file.Decls {
			ne := decl.Endpoint
			if ne == nil || ne.Name == nil || seen[ne.Name.Name] {
				continue
			}
			seen[ne.Name.Name] = true
			detail := ne.Dir
			if ne.Kind != nil {
				detail += " " + ne.Kind.Name
			}
			items = append(items, protocol.CompletionItem{Label: ne.Name.Name, Kind: protocol.CompletionItemKindModule, Detail: detail})
		}
	}
	return items
}

func markdown(s string) any {
	if s == "" {
		return nil
	}
	return protocol.MarkupContent{Kind: protocol.Markdown, Value: s}
}
