package lsp

import (
	"go.lsp.dev/protocol"

	"github.com/mqb-dev/mqb/lang"
)

// definition answers go-to-definition at byte offset off of d: on the NAME
// of `ref NAME`, the `output NAME = …` (or `input`) declaring it in any open
// document.
func (s *server) definition(d *document, off int) []protocol.Location {
	_, st, i := d.outline.tokenAt(off)
	if st == nil || i < 1 || st.toks[i].Type != lang.TIdent || st.toks[i-1].Value != "ref" {
		return nil
	}
	if loc, ne := s.findEndpoint(st.toks[i].Value); ne != nil {
		return []protocol.Location{loc}
	}
	return nil
}

// findEndpoint looks for the named endpoint name in the open documents,
// in URI order.
func (s *server) findEndpoint(name string) (protocol.Location, *lang.NamedEndpoint) {
	for _, u := range s.sortedURIs() {
		d := s.docs[u]
		for _, decl := range d.file.Decls {
			ne := decl.Endpoint
			if ne == nil || ne.Name == nil || ne.Name.Name != name {
				continue
			}
			r := ne.Name.Range()
			return protocol.Location{URI: d.uri, Range: d.diagRange(r)}, ne
		}
	}
	return protocol.Location{}, nil
}
