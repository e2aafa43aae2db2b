// Package lsp is mqb's language server, started by `mqbc lsp` and spoken to
// over stdio by editors (editors/vscode starts it). It keeps the open .mqb
// documents in memory and answers from the same front end the build uses:
//
//   - diagnostics: every change re-runs lang.Parse and compiler.Compile and
//     publishes the codes, severities and ranges `mqbc build` would print;
//   - hover: a route's proven verdict with its reasons, and the stdlib
//     documentation of kinds, steps, attributes and route settings;
//   - completion: kinds after from/to/handle/call/forward, steps and settings
//     in a route, the attributes a block has not set yet, enum values;
//   - definition: `ref NAME` jumps to `output NAME = …` in any open document;
//   - formatting: lang.Format as one whole-document edit.
//
// Completion and hover read the document through a token-level outline
// (outline.go) rather than the AST, so they keep working while a line is
// half typed and the parser has dropped the declaration around it.
//
// Framing (frame.go): messages are Content-Length framed, headers bounded
// to 8 KiB and bodies to 64 MiB. A frame the server cannot read past ends
// Serve with an error (mqbc lsp logs it and exits 1); a well-framed body
// that is not JSON-RPC is logged and skipped.
//
// Positions: the protocol counts lines from 0 and characters in UTF-16 code
// units; diag positions are 1-based with byte offsets. Conversion goes
// through the byte offset (text.go), which is exact for any text.
package lsp
