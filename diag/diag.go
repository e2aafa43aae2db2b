// Package diag holds mqb's diagnostics as values: a position in a .mqb file, a
// stable code, a severity, a one-sentence summary and an optional detail. The
// parser and the checker collect them in a List and keep going after an error;
// rendering (text with a caret, or JSON) happens in one place, render.go.
package diag

import (
	"fmt"
	"sort"
)

// Pos is a position in a source file. Line and Col are 1-based; Col counts
// bytes. Offset is the 0-based byte offset.
type Pos struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line"`
	Col    int    `json:"col"`
	Offset int    `json:"offset"`
}

// IsValid reports whether p points somewhere.
func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Range is a half-open span [Start, End) of a source file.
type Range struct {
	Start Pos `json:"start"`
	End   Pos `json:"end"`
}

// Severity says whether a diagnostic fails the build.
type Severity int

const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// MarshalText lets Severity appear as "error"/"warning" in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one finding about a .mqb file.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`             // stable code, e.g. "E012"; see codes.go
	Summary  string   `json:"summary"`          // one sentence, no trailing period
	Detail   string   `json:"detail,omitempty"` // why, and what to do instead
	Range    Range    `json:"range"`
}

// List collects diagnostics in the order they were found.
type List []Diagnostic

// Add appends a diagnostic with the severity its code implies.
func (l *List) Add(code string, r Range, summary, detail string) {
	*l = append(*l, Diagnostic{Severity: SeverityOf(code), Code: code, Summary: summary, Detail: detail, Range: r})
}

// Addf is Add with a formatted summary and no detail.
func (l *List) Addf(code string, r Range, format string, args ...any) {
	l.Add(code, r, fmt.Sprintf(format, args...), "")
}

// HasErrors reports whether any diagnostic is an error.
func (l List) HasErrors() bool {
	for _, d := range l {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (l List) Errors() List {
	var out List
	for _, d := range l {
		if d.Severity == Error {
			out = append(out, d)
		}
	}
	return out
}

// Sort orders diagnostics by file and position, keeping the discovery order
// for equal positions.
func (l List) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Range.Start, l[j].Range.Start
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Offset < b.Offset
	})
}
