package compiler

import (
	"slices"
	"testing"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/stdlib"
)

// TestRunnableFormatsCoverEveryFormat keeps stdlib's Formats an allow-list
// that is complete: every kind that declares format at an end it has must
// name there the formats its runtime reader or writer implements, each one
// declared, and the declared default among them. A kind added without an
// entry would build with its default only, which this test makes visible.
func TestRunnableFormatsCoverEveryFormat(t *testing.T) {
	for _, name := range stdlib.KindNames() {
		k, _ := stdlib.LookupKind(name)
		a := k.Attr("format")
		if a == nil {
			continue
		}
		for _, end := range []struct {
			has  bool
			end  string
			role string
		}{{k.Source, stdlib.EndSource, plan.RoleSource}, {k.Sink, stdlib.EndSink, plan.RoleSink}} {
			if !end.has || (a.End != "" && a.End != end.end) || k.Unimplemented[end.end] != "" {
				continue
			}
			ok := runnableFormats(k, end.role)
			if ok == nil {
				t.Errorf("%s %s declares format %v but stdlib's Formats has no entry for it", name, end.role, a.Enum)
				continue
			}
			for _, f := range ok {
				if !slices.Contains(a.Enum, f) {
					t.Errorf("%s %s: runnable format %q is not declared (%v)", name, end.role, f, a.Enum)
				}
			}
			if a.Default != nil && !slices.Contains(ok, a.Default.(string)) {
				t.Errorf("%s %s: the default format %v is not runnable (%v)", name, end.role, a.Default, ok)
			}
		}
	}
}
