package compiler

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"github.com/mqb-dev/mqb/diag"
)

// goldenLimits reads an archive's optional `-- limits --` section
// (`routes N`, `tokens N`, `bytes N`, one a line) over DefaultLimits, so a
// golden case can show E003 without a file of 10,000 routes.
func goldenLimits(ar *txtar.Archive) Limits {
	lim := DefaultLimits
	for _, f := range ar.Files {
		if f.Name != "limits" {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
			var what string
			var n int
			if _, err := fmt.Sscan(line, &what, &n); err != nil {
				panic(fmt.Sprintf("limits section: %q: %v", line, err))
			}
			switch what {
			case "routes":
				lim.Routes = n
			case "tokens":
				lim.Tokens = n
			case "bytes":
				lim.SourceBytes = n
			default:
				panic("limits section: unknown limit " + what)
			}
		}
	}
	return lim
}

func minimalRoutes(n int) []byte { return namedRoutes("r", n) }

func namedRoutes(prefix string, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "route %s%d {\n  from file { path = \"in.jsonl\" }\n  to file { path = \"out%d.jsonl\" }\n}\n", prefix, i, i)
	}
	return b.Bytes()
}

// TestBuildLimits: each bound of one build is an E003 diagnostic naming the
// bound and where it was crossed, and the plan then has no route.
func TestBuildLimits(t *testing.T) {
	three := minimalRoutes(3)
	for _, tc := range []struct {
		name string
		srcs []Source
		lim  Limits
		want string // rendered first line of the only diagnostic; "" = builds
	}{
		{"under every bound", []Source{{"a.mqb", three}}, Limits{SourceBytes: len(three), Tokens: 1000, Routes: 3}, ""},
		{"routes in one file", []Source{{"a.mqb", three}}, Limits{Routes: 2},
			"a.mqb:9:7: error[E003]: the build declares 3 routes; one build accepts at most 2 (this is route 3)"},
		{"routes over two files", []Source{{"a.mqb", namedRoutes("a", 2)}, {"b.mqb", namedRoutes("b", 2)}}, Limits{Routes: 3},
			"b.mqb:5:7: error[E003]: the build declares 4 routes; one build accepts at most 3 (this is route 4)"},
		{"bytes of one file", []Source{{"a.mqb", three}}, Limits{SourceBytes: len(three) - 1},
			fmt.Sprintf("a.mqb:1:1: error[E003]: the build's files hold more than %d bytes of source (a.mqb brings it over); one build accepts at most %d bytes", len(three)-1, len(three)-1)},
		{"bytes over two files", []Source{{"a.mqb", three}, {"b.mqb", namedRoutes("b", 3)}}, Limits{SourceBytes: len(three) + 10},
			fmt.Sprintf("b.mqb:1:1: error[E003]: the build's files hold more than %d bytes of source (b.mqb brings it over); one build accepts at most %d bytes", len(three)+10, len(three)+10)},
		{"every bound over two files", []Source{{"a.mqb", three}, {"b.mqb", namedRoutes("b", 3)}}, Limits{SourceBytes: 2 * len(three), Tokens: 134, Routes: 6}, ""},
		{"tokens in one file", []Source{{"a.mqb", three}}, Limits{Tokens: 10},
			"a.mqb:2:32: error[E003]: a.mqb holds more than 10 tokens, more than one build accepts; stopped reading here"},
		{"tokens over two files", []Source{{"a.mqb", three}, {"b.mqb", namedRoutes("b", 3)}}, Limits{Tokens: 100},
			"b.mqb:1:1: error[E003]: the build's files hold more than 100 tokens (b.mqb brings them to 134); one build accepts at most 100"},
		{"lexical errors count as tokens", []Source{{"a.mqb", bytes.Repeat([]byte("@"), 50)}}, Limits{Tokens: 10},
			"a.mqb:1:11: error[E003]: a.mqb holds more than 10 tokens, more than one build accepts; stopped reading here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, diags := CompileSourcesWithin(tc.srcs, tc.lim)
			if tc.want == "" {
				if diags.HasErrors() || len(p.Routes) == 0 {
					t.Fatalf("want a build, got %d routes and %v", len(p.Routes), diags)
				}
				return
			}
			var b bytes.Buffer
			diag.WriteText(&b, diags, nil)
			if first, _, _ := strings.Cut(b.String(), "\n"); len(diags) != 1 || first != tc.want || len(p.Routes) != 0 {
				t.Errorf("got %d routes and\n%s\nwant only\n%s", len(p.Routes), b.String(), tc.want)
			}
		})
	}
}

// TestDefaultLimitsStopEarly runs the real default bounds on inputs just
// over them and checks the build refuses them cheaply: over the byte bound
// nothing is lexed; over the route bound nothing is checked (checking
// 10,001 routes would allocate gigabytes).
func TestDefaultLimitsStopEarly(t *testing.T) {
	measure := func(srcs []Source) (diag.List, uint64) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, diags := CompileSources(srcs)
		runtime.ReadMemStats(&m1)
		return diags, m1.TotalAlloc - m0.TotalAlloc
	}
	big := bytes.Repeat([]byte("#\n"), DefaultLimits.SourceBytes/2+1)
	diags, alloc := measure([]Source{{"big.mqb", big}})
	if len(diags) != 1 || diags[0].Code != "E003" || !strings.Contains(diags[0].Summary, "16 MiB") || alloc > 1<<20 {
		t.Errorf("%d bytes: %v, %d bytes allocated", len(big), diags, alloc)
	}
	if testing.Short() {
		t.Skip("parsing 10,001 routes takes seconds")
	}
	many := minimalRoutes(DefaultLimits.Routes + 1)
	diags, alloc = measure([]Source{{"many.mqb", many}})
	if len(diags) != 1 || diags[0].Code != "E003" || !strings.Contains(diags[0].Summary, "10001 routes") {
		t.Errorf("10,001 routes: %v", diags)
	}
	// Parsing alone allocates a few hundred MB; checking would be GBs.
	if alloc > 1<<30 {
		t.Errorf("10,001 routes: %d MB allocated before refusing", alloc>>20)
	}
	t.Logf("10,001 routes refused after %d MB allocated", alloc>>20)
}
