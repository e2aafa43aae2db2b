package compiler

import (
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/internal/genroutes"
	"github.com/mqb-dev/mqb/plan"
)

// TestGenRoutesCompile keeps the benchmark honest: every generated route
// compiles without a diagnostic, so the benchmark times the whole build.
func TestGenRoutesCompile(t *testing.T) {
	p, diags := CompileSourcesWithin([]Source{{Name: "gen.mqb", Src: genroutes.Routes(30)}}, Limits{})
	if len(diags) > 0 {
		t.Fatalf("generated routes have diagnostics:\n%v", diags)
	}
	if len(p.Routes) != 30 {
		t.Fatalf("%d routes compiled, want 30", len(p.Routes))
	}
}

// BenchmarkBuild times parsing and compiling generated files of n routes
// (no bound on their size) into a plan, reporting per route the wall
// time, the process's CPU time (user and system, garbage collection
// included: on a shared machine it moves less than the wall time), the
// bytes allocated and the heap live after the build.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			benchBuild(b, n, func(src []byte) (any, int, diag.List) {
				p, diags := CompileSourcesWithin([]Source{{Name: "gen.mqb", Src: src}}, Limits{})
				return p, len(p.Routes), diags
			})
		})
	}
}

// BenchmarkBuildStream times what `mqbc build -o` does: each route
// compiled, written to the plan (here to nowhere) and let go, up to
// 100,000 routes, the most one process holds only its text for.
func BenchmarkBuildStream(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			benchBuild(b, n, func(src []byte) (any, int, diag.List) {
				pw := plan.NewWriter(io.Discard, plan.Version, false)
				routes := 0
				diags := CompileSourcesTo([]Source{{Name: "gen.mqb", Src: src}}, Limits{}, func(r *plan.Route) {
					routes++
					if err := pw.Route(*r); err != nil {
						b.Fatal(err)
					}
				})
				if err := pw.Close(); err != nil {
					b.Fatal(err)
				}
				return nil, routes, diags
			})
		})
	}
}

// benchBuild times build over a generated file of n routes; build
// returns what it keeps (counted as live), how many routes it compiled
// and the diagnostics.
func benchBuild(b *testing.B, n int, build func(src []byte) (kept any, routes int, diags diag.List)) {
	src := genroutes.Routes(n)
	b.SetBytes(int64(len(src)))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var live uint64
	var cpu time.Duration
	for b.Loop() {
		start := cpuTime()
		kept, routes, diags := build(src)
		if len(diags) > 0 || routes != n {
			b.Fatalf("%d routes, diagnostics %v", routes, diags)
		}
		cpu += cpuTime() - start
		b.StopTimer()
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > before.HeapAlloc {
			live = max(live, m.HeapAlloc-before.HeapAlloc)
		}
		runtime.KeepAlive(kept)
		b.StartTimer()
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/route")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/route")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(n), "B/route")
	b.ReportMetric(float64(live)/float64(n), "live-B/route")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
