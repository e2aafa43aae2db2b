package compiler

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// genRoutes writes n routes of a realistic mix, all of which compile
// without diagnostics: a file into SQL with id, dedup, filter and map, a
// Kafka topic into SQL, and a file into positional parts.
func genRoutes(n int) []byte {
	var sb strings.Builder
	for i := range n {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&sb, `route orders_%d {
  guarantee effectively_once
  from file { path = "in/orders_%d.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup_%d", ttl = 1h, keep = true }
  filter payload.total > 0 && payload.kind in ["a", "b"]
  map {
    total = payload.total * 2
    customer = lower(payload.customer)
  }
  retry { attempts = 3 }
  dlq { to file { path = "out/orders_%d.dlq.jsonl" } }
  to sql {
    url = "postgres://mqb:pw@127.0.0.1/shop"
    insert_query = """
      INSERT INTO orders_%d (id, body, total)
      VALUES (${meta["mqb.id"]}, ${payload.body}, ${payload.total})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`, i, i, i, i, i)
		case 1:
			fmt.Fprintf(&sb, `route load_%d {
  guarantee effectively_once
  from kafka { url = "127.0.0.1:9092", topic = "orders_%d", group_id = "loader_%d" }
  id payload.order_id
  to sql {
    url = "sqlite://out/orders_%d.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, body TEXT NOT NULL, total REAL)"
    insert_query = """
      INSERT INTO orders (id, body, total)
      VALUES (${meta["mqb.id"]}, ${payload.body}, ${payload.total})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`, i, i, i, i)
		default:
			fmt.Fprintf(&sb, `route parts_%d {
  from file { path = "in/events_%d.jsonl" }
  filter payload.level != "debug"
  to file { path = "out/parts_%d", name_by = source_position }
}
`, i, i, i)
		}
	}
	return []byte(sb.String())
}

// TestGenRoutesCompile keeps the benchmark honest: every generated route
// compiles without a diagnostic, so the benchmark times the whole build.
func TestGenRoutesCompile(t *testing.T) {
	p, diags := CompileSourcesWithin([]Source{{Name: "gen.mqb", Src: genRoutes(30)}}, Limits{})
	if len(diags) > 0 {
		t.Fatalf("generated routes have diagnostics:\n%v", diags)
	}
	if len(p.Routes) != 30 {
		t.Fatalf("%d routes compiled, want 30", len(p.Routes))
	}
}

// BenchmarkBuild times parsing and compiling generated files of n routes
// (no bound on their size), reporting per route the wall time, the
// process's CPU time (user and system, garbage collection included: on a
// shared machine it moves less than the wall time), the bytes allocated
// and the heap live after the build.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			src := genRoutes(n)
			b.SetBytes(int64(len(src)))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var live uint64
			var cpu time.Duration
			for b.Loop() {
				start := cpuTime()
				p, diags := CompileSourcesWithin([]Source{{Name: "gen.mqb", Src: src}}, Limits{})
				if len(diags) > 0 || len(p.Routes) != n {
					b.Fatalf("%d routes, diagnostics %v", len(p.Routes), diags)
				}
				cpu += cpuTime() - start
				b.StopTimer()
				var m runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > before.HeapAlloc {
					live = max(live, m.HeapAlloc-before.HeapAlloc)
				}
				runtime.KeepAlive(p)
				b.StartTimer()
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/route")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/route")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(n), "B/route")
			b.ReportMetric(float64(live)/float64(n), "live-B/route")
		})
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
