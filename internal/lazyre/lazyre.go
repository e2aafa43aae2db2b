// Package lazyre compiles a regular expression the first time it is used
// instead of at package init, so that a process pays (in start-up time
// and heap) only for the patterns of the code it runs: mqbc links every
// connector, and `mqbc run` of a file route should not compile the SQL
// connector's patterns.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr on its first call and returns
// that same *regexp.Regexp on every call. Like regexp.MustCompile it
// panics if expr does not compile, on first use rather than at init: keep
// expr a constant that a test of the code using it reaches.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
