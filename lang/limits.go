package lang

import (
	"fmt"

	"github.com/mqb-dev/mqb/diag"
)

// Limits bound what one parse accepts, so a runaway or hostile input (a
// generated file of a million routes, megabytes of one-byte tokens) is
// refused with a diagnostic instead of exhausting memory: a lexed token
// costs about 100 bytes and a parsed route several KiB.
type Limits struct {
	// Bytes bounds the source; 0 means no bound.
	Bytes int
	// Tokens bounds the tokens lexed, lexical errors included (each holds
	// a diagnostic); 0 means no bound.
	Tokens int
}

// DefaultLimits is what Parse accepts: 16 MiB of source and two million
// tokens (a realistic route is about 90 tokens, so some 20,000 routes).
var DefaultLimits = Limits{Bytes: 16 << 20, Tokens: 2_000_000}

// ParseWithin is Parse bounded by lim. A file over a bound is not parsed:
// the File has no declarations and the list holds one E003 diagnostic at
// the point where the bound was crossed. File.Tokens tells how many tokens
// were lexed, so a caller can bound several files together.
func ParseWithin(filename string, src []byte, lim Limits) (*File, diag.List) {
	if lim.Bytes > 0 && len(src) > lim.Bytes {
		var l diag.List
		at := diag.Pos{File: filename, Line: 1, Col: 1}
		l.Add("E003", diag.Range{Start: at, End: at},
			fmt.Sprintf("%s is %s of source, more than the %s one build accepts", filename, byteSize(len(src)), byteSize(lim.Bytes)),
			"The bound keeps a build from exhausting memory. Split the routes over several files built and run separately.")
		return &File{Name: filename, Src: src}, l
	}
	if f, diags, ok := parseByDecl(filename, src, lim.Tokens); ok {
		return checked(f, diags)
	}
	toks, diags, over := lexWithin(filename, src, lim.Tokens)
	if over {
		at := posOf(toks[len(toks)-1].Pos)
		var l diag.List
		l.Add("E003", diag.Range{Start: at, End: at},
			fmt.Sprintf("%s holds more than %s tokens, more than one build accepts; stopped reading here", filename, thousands(lim.Tokens)),
			"The bound keeps a build from exhausting memory (each token and each lexical error is held in memory). Split the routes over several files built and run separately.")
		return &File{Name: filename, Src: src, Tokens: len(toks)}, l
	}
	return parseTokensOf(filename, src, toks, diags)
}

// byteSize writes n bytes the way the limits are stated: MiB, KiB or bytes.
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// thousands writes n with comma separators: 2,000,000.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
