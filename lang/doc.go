// Package lang is the front end of the .mqb language: a hand-written lexer
// (strings with ${…} placeholders, """ raw blocks, durations, # and //
// comments, significant newlines), a recursive-descent parser building the
// AST of grammar.ebnf (every node carries its position), template splitting,
// and the formatter behind `mqbc fmt`. Parse errors are diag values with file:line:col
// and code E001/E002; parsing recovers at top-level declarations so one run
// reports an error for every broken declaration.
package lang
