package lang

import (
	"iter"

	"github.com/mqb-dev/mqb/diag"
)

// The AST is what the parser (descent.go) builds, one struct per production
// of grammar.ebnf. Every node has Pos, where its first token starts, and
// EndPos, where the raw token after its last one starts (a newline or a
// comment included); Expr, the paths and UnnestArg end at their last byte.

// File is one parsed .mqb file.
type File struct {
	Name  string
	Src   []byte
	Decls []*Decl
	// Comments holds every comment token, for the formatter.
	Comments []Token
	// Tokens is how many tokens the file was lexed into (see Limits).
	Tokens int
}

// Decl is a top-level declaration.
type Decl struct {
	Route    *Route
	Endpoint *NamedEndpoint
}

// Route is `route NAME { … }`.
type Route struct {
	Pos    Position
	EndPos Position
	Name   *Ident
	Body   *Block
}

// NamedEndpoint is `output NAME = kind { … }` (or `input`), used as `ref NAME`.
type NamedEndpoint struct {
	Pos    Position
	EndPos Position
	Dir    string
	Name   *Ident
	Kind   *Ident
	Body   *Block
}

// Block is `{ item, item … }`; items are separated by newlines or commas.
type Block struct {
	Pos     Position
	EndPos  Position
	Entries []*BlockEntry
}

// BlockEntry is an item or a comma; Items() drops the commas. The grammar
// skips newlines between tokens; the parser's expr and checkSeparators
// read them from the raw tokens.
type BlockEntry struct {
	Item *Item
	Sep  string
}

// Items returns the block's items in order.
func (b *Block) Items() []*Item {
	if b == nil {
		return nil
	}
	out := make([]*Item, 0, len(b.Entries))
	for _, e := range b.Entries {
		if e.Item != nil {
			out = append(out, e.Item)
		}
	}
	return out
}

// EachItem yields the block's items in order, as Items returns them,
// without making a slice of them: the compiler walks each block several
// times.
func (b *Block) EachItem() iter.Seq[*Item] {
	return func(yield func(*Item) bool) {
		if b == nil {
			return
		}
		for _, e := range b.Entries {
			if e.Item != nil && !yield(e.Item) {
				return
			}
		}
	}
}

// Item is every statement form inside a block:
//
//	key = value            attribute, route setting, map field
//	key.a["b"] = value     a map target (Path holds .a["b"])
//	key ref NAME           to ref enrich
//	key kind { … }         from file { … }, to switch { … }, call sql { … }
//	key "label" { … }      case "x" { … }
//	key { … }              dedup { … }, default { … }, dlq { … }
//	del path               a map delete: del payload.tmp (Del holds the path)
//	unnest path [as name]  unnest payload.items as item (Unnest holds both)
//	key expr               id payload.order_id, filter x > 1, guarantee effectively_once
//	key                    a bare word
type Item struct {
	Pos    Position
	EndPos Position
	Key    *Ident
	Path   *KeyPath
	Ref    *Ident
	Assign *Value
	Kind   *Ident
	Label  *Str
	Body   *Block
	Del    *DelPath
	Unnest *UnnestArg
	Arg    *Expr
}

// Ident is an identifier with its position.
type Ident struct {
	Pos    Position
	EndPos Position
	Name   string
}

// Str is a quoted string or raw block, as written (quotes included).
type Str struct {
	Pos    Position
	EndPos Position
	Raw    string
}

// Value is the right-hand side of `=`. A `{` that opens an expr-lang map
// literal (`{"line": payload}`, `{line: payload}`) starts an expression,
// not a block.
type Value struct {
	Pos    Position
	EndPos Position
	List   *List
	Block  *Block
	Expr   *Expr
}

// List is `[ value, value … ]`.
type List struct {
	Pos    Position
	EndPos Position
	Elems  []*Value
}

// Range returns the source range of a node given its Pos and EndPos.
func Range(pos, end Position) diag.Range {
	return diag.Range{Start: posOf(pos), End: posOf(end)}
}

// Range of the identifier.
// The range ends at the identifier's last byte, not at the next token
// (EndPos), so a caret underlines exactly the name.
func (i *Ident) Range() diag.Range { return tokenRange(i.Pos, i.Name) }

// Range of the string.
func (s *Str) Range() diag.Range { return tokenRange(s.Pos, s.Raw) }

func tokenRange(pos Position, text string) diag.Range {
	end := pos
	advance(&end, text)
	return Range(pos, end)
}

// Range of the value.
func (v *Value) Range() diag.Range {
	if v.Expr != nil {
		return v.Expr.Range()
	}
	return Range(v.Pos, v.EndPos)
}

// Range of the item.
func (it *Item) Range() diag.Range { return Range(it.Pos, it.EndPos) }
