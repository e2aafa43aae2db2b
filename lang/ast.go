package lang

import (
	"github.com/alecthomas/participle/v2/lexer"

	"github.com/mqb-dev/mqb/diag"
)

// The AST is the participle grammar: each struct's tags are its production.
// Pos and EndPos are filled by participle on every node.

// File is one parsed .mqb file.
type File struct {
	Name  string  `parser:""`
	Src   []byte  `parser:""`
	Decls []*Decl `parser:"@@*"`
	// Comments holds every comment token, for the formatter.
	Comments []lexer.Token `parser:""`
	// Tokens is how many tokens the file was lexed into (see Limits).
	Tokens int `parser:""`
}

// Decl is a top-level declaration.
type Decl struct {
	Route    *Route         `parser:"  @@"`
	Endpoint *NamedEndpoint `parser:"| @@"`
}

// Route is `route NAME { … }`.
type Route struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   *Ident `parser:"'route' @@"`
	Body   *Block `parser:"@@"`
}

// NamedEndpoint is `output NAME = kind { … }` (or `input`), used as `ref NAME`.
type NamedEndpoint struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Dir    string `parser:"@( 'output' | 'input' )"`
	Name   *Ident `parser:"@@ '='"`
	Kind   *Ident `parser:"@@"`
	Body   *Block `parser:"@@"`
}

// Block is `{ item, item … }`; items are separated by newlines or commas.
type Block struct {
	Pos     lexer.Position
	EndPos  lexer.Position
	Entries []*BlockEntry `parser:"'{' @@* '}'"`
}

// BlockEntry is an item or a comma; Items() drops the commas. Newlines are
// elided from the grammar (see parseTokens) to keep participle's branching
// cheap; Expr.Parse and checkSeparators read them from the raw tokens.
type BlockEntry struct {
	Item *Item  `parser:"  @@"`
	Sep  string `parser:"| @','"`
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
	Pos    lexer.Position
	EndPos lexer.Position
	Key    *Ident     `parser:"@@"`
	Path   *KeyPath   `parser:"@@?"`
	Ref    *Ident     `parser:"( 'ref' @@"`
	Assign *Value     `parser:"| '=' @@"`
	Kind   *Ident     `parser:"| ( ( (?= Ident '{') @@"`
	Label  *Str       `parser:"    | (?= (String | Raw) '{') @@ )?"`
	Body   *Block     `parser:"  @@ )"`
	Del    *DelPath   `parser:"| @@"`
	Unnest *UnnestArg `parser:"| @@"`
	Arg    *Expr      `parser:"| @@ )?"`
}

// Ident is an identifier with its position.
type Ident struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Name   string `parser:"@Ident"`
}

// Str is a quoted string or raw block, as written (quotes included).
type Str struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Raw    string `parser:"@( String | Raw )"`
}

// Value is the right-hand side of `=`. A `{` that opens an expr-lang map
// literal (`{"line": payload}`, `{line: payload}`) starts an expression,
// not a block.
type Value struct {
	Pos    lexer.Position
	EndPos lexer.Position
	List   *List  `parser:"  @@"`
	Block  *Block `parser:"| (?! '{' (String | Raw | Ident) ':') @@"`
	Expr   *Expr  `parser:"| @@"`
}

// List is `[ value, value … ]`.
type List struct {
	Pos    lexer.Position
	EndPos lexer.Position
	Elems  []*Value `parser:"'[' ( @@ | ',' )* ']'"`
}

// Range returns the source range of a node given its Pos and EndPos.
func Range(pos, end lexer.Position) diag.Range {
	return diag.Range{Start: posOf(pos), End: posOf(end)}
}

// Range of the identifier.
// The range ends at the identifier's last byte, not at the next token
// (participle's EndPos), so a caret underlines exactly the name.
func (i *Ident) Range() diag.Range { return tokenRange(i.Pos, i.Name) }

// Range of the string.
func (s *Str) Range() diag.Range { return tokenRange(s.Pos, s.Raw) }

func tokenRange(pos lexer.Position, text string) diag.Range {
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
