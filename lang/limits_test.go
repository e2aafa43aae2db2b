package lang

import (
	"strings"
	"testing"
)

// TestParseWithin: a file over a bound is one E003 at the point it was
// crossed and no declarations; under the bounds it parses as Parse does.
func TestParseWithin(t *testing.T) {
	src := []byte("route r {\n  from file { path = \"a\" }\n  to file { path = \"b\" }\n}\n")
	for _, tc := range []struct {
		name  string
		lim   Limits
		want  string // "" = parses
		decls int
	}{
		{"no bounds", Limits{}, "", 1},
		{"exact bounds", Limits{Bytes: len(src), Tokens: 23}, "", 1},
		{"bytes", Limits{Bytes: len(src) - 1}, "1:1 a.mqb is 64 bytes of source, more than the 63 bytes one build accepts", 0},
		{"tokens", Limits{Tokens: 5}, "2:7 a.mqb holds more than 5 tokens, more than one build accepts; stopped reading here", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, diags := ParseWithin("a.mqb", src, tc.lim)
			if len(f.Decls) != tc.decls {
				t.Errorf("%d declarations, want %d", len(f.Decls), tc.decls)
			}
			if tc.want == "" {
				if len(diags) != 0 || f.Tokens != 23 {
					t.Errorf("diags %v, %d tokens", diags, f.Tokens)
				}
				return
			}
			if len(diags) != 1 || diags[0].Code != "E003" || diags[0].Range.Start.String()+" "+diags[0].Summary != "a.mqb:"+tc.want {
				t.Errorf("got %v, want E003 at a.mqb:%s", diags, tc.want)
			}
		})
	}
	// Parse applies DefaultLimits.
	_, diags := Parse("big.mqb", []byte(strings.Repeat("#\n", DefaultLimits.Bytes/2+1)))
	if len(diags) != 1 || diags[0].Code != "E003" || !strings.Contains(diags[0].Summary, "more than the 16 MiB") {
		t.Errorf("default bytes: %v", diags)
	}
}
