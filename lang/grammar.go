package lang

import "strings"

// grammar is the .mqb grammar the parser implements, one production per
// line; each is the comment of its function in descent.go.
var grammar = []string{
	`File = Decl* .`,
	`Decl = Route | NamedEndpoint .`,
	`Route = "route" Ident Block .`,
	`Ident = <ident> .`,
	`Block = "{" BlockEntry* "}" .`,
	`BlockEntry = Item | "," .`,
	`Item = Ident KeyPath? (("ref" Ident) | ("=" Value) | ((((?= <ident> "{") Ident) | ((?= (<string> | <raw>) "{") Str))? Block) | DelPath | UnnestArg | Expr)? .`,
	`Value = List | ((?! "{" ","* (<string> | <raw> | <ident>) ":") Block) | Expr .`,
	`List = "[" (Value | ",")* "]" .`,
	`Str = (<string> | <raw>) .`,
	`NamedEndpoint = ("output" | "input") Ident "=" Ident Block .`,
}

// Grammar returns the EBNF of the .mqb grammar, as written to grammar.ebnf.
func Grammar() string {
	return "// The grammar of lang's parser (lang/descent.go), written by `go test ./lang -update`. Do not edit.\n" +
		"// Newlines and comments may stand between any two tokens; (?= …) and (?! …) look ahead without reading.\n" +
		"// Expr is an expr-lang expression (or one literal), read by the parser's expr.\n" +
		"// KeyPath is ( \".\" <ident> | \"[\" <string> \"]\" )* after a key, the \"[\" touching what precedes it;\n" +
		"// DelPath is <ident> KeyPath after a key `del`, alone on its line;\n" +
		"// UnnestArg is <ident> KeyPath [ \"as\" <ident> ] after a key `unnest`, ending its item.\n\n" +
		strings.Join(grammar, "\n") + "\n"
}
