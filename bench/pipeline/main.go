// Command pipeline times whole routes through runtime.Run on generated
// input: file → id → Pebble dedup → DLQ → SQLite ON CONFLICT DO NOTHING, and
// file → file (write_time passthrough). It prints the median of several runs,
// records per CPU-second, heap allocations per record and the process's
// peak RSS.
//
// The elided scenario is the SQLite route as the compiler builds it: its
// dedup left out because the sink's conflict clause absorbs the repeats.
// The text scenario is file → file as bench/compare runs it against cat
// (format = text: nothing reads or checks the payload, and lines go
// through as read).
//
//	go run ./bench/pipeline -n 200000 -runs 5 [-cpuprofile cpu.out] [-only sqlite|elided|file|text]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mqb-dev/mqb/bench/internal/orders"
	_ "github.com/mqb-dev/mqb/connector/all"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func main() {
	n := flag.Int("n", 200000, "records in the generated input")
	runs := flag.Int("runs", 5, "runs per scenario")
	batch := flag.Int("batch", 1024, "batch_size")
	concurrency := flag.Int("concurrency", 1, "route concurrency")
	only := flag.String("only", "", "run one scenario: sqlite, elided, file or text")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of all runs")
	heapprofile := flag.String("heapprofile", "", "write a heap profile 1.5 s into the first run")
	flag.Parse()

	dir, err := os.MkdirTemp("", "mqb-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	input := filepath.Join(dir, "orders.jsonl")
	if err := orders.Generate(input, *n); err != nil {
		log.Fatal(err)
	}
	st, _ := os.Stat(input)
	fmt.Printf("input: %d records, %.1f MB\n", *n, float64(st.Size())/1e6)

	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *heapprofile != "" {
		go func() {
			time.Sleep(1500 * time.Millisecond)
			f, err := os.Create(*heapprofile)
			if err != nil {
				log.Fatal(err)
			}
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}()
	}
	scenarios := []struct {
		name string
		plan func(run string) plan.Plan
	}{
		{"sqlite", func(run string) plan.Plan { return sqlitePlan(input, filepath.Join(dir, run), *batch, *concurrency) }},
		{"elided", func(run string) plan.Plan { return elidedPlan(input, filepath.Join(dir, run), *batch, *concurrency) }},
		{"file", func(run string) plan.Plan { return filePlan(input, filepath.Join(dir, run), *batch, *concurrency) }},
		{"text", func(run string) plan.Plan { return textPlan(input, filepath.Join(dir, run), *batch, *concurrency) }},
	}
	for _, sc := range scenarios {
		if *only != "" && *only != sc.name {
			continue
		}
		var rates, cpuRates, allocs []float64
		for r := 0; r < *runs; r++ {
			run := fmt.Sprintf("%s-%d", sc.name, r)
			os.MkdirAll(filepath.Join(dir, run), 0o755)
			var m0, m1 goruntime.MemStats
			goruntime.ReadMemStats(&m0)
			start, cpu0 := time.Now(), cpuTime()
			stats, err := runtime.Run(context.Background(), sc.plan(run), runtime.Options{})
			el, cpu := time.Since(start), cpuTime()-cpu0
			goruntime.ReadMemStats(&m1)
			if err != nil {
				log.Fatalf("%s: %v", sc.name, err)
			}
			rs := stats.Routes[0]
			if rs.In != int64(*n) {
				log.Fatalf("%s: read %d of %d", sc.name, rs.In, *n)
			}
			rates = append(rates, float64(rs.In)/el.Seconds())
			cpuRates = append(cpuRates, float64(rs.In)/cpu.Seconds())
			allocs = append(allocs, float64(m1.Mallocs-m0.Mallocs)/float64(rs.In))
			if r == 0 {
				fmt.Printf("%-7s stats: %+v\n", sc.name, rs)
			}
			os.RemoveAll(filepath.Join(dir, run))
		}
		sorted := slices.Clone(rates)
		slices.Sort(sorted)
		var each []string
		for _, r := range rates {
			each = append(each, fmt.Sprintf("%.0f", r))
		}
		slices.Sort(cpuRates)
		slices.Sort(allocs)
		fmt.Printf("%-7s median %9.0f rec/s  runs [%s]; median %.0f records per CPU-second, %.1f allocations per record\n",
			sc.name, sorted[len(sorted)/2], strings.Join(each, " "), cpuRates[len(cpuRates)/2], allocs[len(allocs)/2])
	}
	fmt.Printf("peak RSS: %s\n", peakRSS())
}

func str(s string) plan.Value { return plan.Value{Type: plan.TString, Str: s} }

func source(input, dir string) plan.Node {
	return plan.Node{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
		"path": str(input), "mode": {Type: plan.TEnum, Str: "consume"},
		"checkpoint_store": str("pebble://" + filepath.Join(dir, "state"))}}
}

func dlq(dir string) plan.Node {
	return plan.Node{ID: "n3", Role: plan.RoleStep, Kind: "dlq", Side: plan.SideOutput, Children: []plan.Branch{{
		Label: plan.BranchTo, Node: plan.Node{ID: "n3.0", Role: plan.RoleSink, Kind: "file",
			Attrs: map[string]plan.Value{"path": str(filepath.Join(dir, "dlq.jsonl"))}}}}}
}

func sqlitePlan(input, dir string, batch, concurrency int) plan.Plan {
	nodes := []plan.Node{
		source(input, dir),
		{ID: "n1", Role: plan.RoleStep, Kind: "id", Expr: "payload.order_id"},
		{ID: "n2", Role: plan.RoleStep, Kind: "dedup", Attrs: map[string]plan.Value{
			"key": {Type: plan.TExpr, Expr: `meta["mqb.id"]`}, "store": str("pebble://" + filepath.Join(dir, "dedup")),
			"ttl": {Type: plan.TDuration, Str: "1h", Int: int64(time.Hour)}}},
		dlq(dir),
		{ID: "n4", Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{
			"url":          {Type: plan.TTemplate, Template: []plan.Part{{Lit: "sqlite://" + filepath.Join(dir, "orders.db")}}},
			"create_table": str(`CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER, body TEXT)`),
			"insert_query": {Type: plan.TTemplate, Template: []plan.Part{
				{Lit: "INSERT INTO orders (id, amount, body) VALUES ("}, {Expr: `meta["mqb.id"]`},
				{Lit: ", "}, {Expr: "payload.amount"}, {Lit: ", "}, {Expr: "payload.body"},
				{Lit: ") ON CONFLICT (id) DO NOTHING"}}},
		}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "bench", Concurrency: concurrency, BatchSize: batch, Nodes: nodes}}}
}

// elidedPlan is sqlitePlan as the compiler emits it at concurrency 1: the
// dedup left out, since ON CONFLICT (id) DO NOTHING absorbs its repeats.
func elidedPlan(input, dir string, batch, concurrency int) plan.Plan {
	p := sqlitePlan(input, dir, batch, concurrency)
	r := &p.Routes[0]
	r.Nodes = slices.DeleteFunc(r.Nodes, func(n plan.Node) bool { return n.Kind == "dedup" })
	r.Elided = []plan.Elision{{Kind: "dedup", Key: `meta["mqb.id"]`, By: "n4"}}
	return p
}

func filePlan(input, dir string, batch, concurrency int) plan.Plan {
	nodes := []plan.Node{
		source(input, dir),
		dlq(dir),
		{ID: "n4", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
			"path": str(filepath.Join(dir, "out.jsonl")), "name_by": {Type: plan.TEnum, Str: "write_time"}}},
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: "bench", Concurrency: concurrency, BatchSize: batch, Nodes: nodes}}}
}

// textPlan is filePlan reading the lines as text, as bench/compare's
// file pair does.
func textPlan(input, dir string, batch, concurrency int) plan.Plan {
	p := filePlan(input, dir, batch, concurrency)
	p.Routes[0].Nodes[0].Attrs["format"] = plan.Value{Type: plan.TEnum, Str: "text"}
	return p
}

// cpuTime is the process's user + system CPU time so far. On a shared
// machine it tells how much work a run took whatever else was running.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS reads VmHWM from /proc/self/status (Linux).
func peakRSS() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
