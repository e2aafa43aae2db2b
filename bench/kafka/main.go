// Command kafka times mqb against kcat through the same local broker
// (cmd/mqb-testbroker, a separate process): file → Kafka (mqb's kafka sink
// vs. kcat -P) and Kafka → JSON-lines file (mqb's kafka source into a file
// sink vs. kcat -C -e). Each scenario alternates mqb and kcat runs on fresh
// topics, then prints the medians in records/s and mqb's ratio to kcat.
// Run it from the module root (it builds cmd/mqb-testbroker):
//
//	go run ./bench/kafka -n 500000 -runs 5 [-partitions 4] [-kcat kcat]
//	go run ./bench/kafka -only publish -memprofile /tmp/mem   # one scenario, with a heap profile
//	go run ./bench/kafka -only publish -mqbc /tmp/mqbc        # mqb as a whole process, as kcat is
//	go run ./bench/kafka -only publish -kcat-header           # kcat carrying the id header mqb's records carry
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	_ "github.com/mqb-dev/mqb/connector/all"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

func main() {
	n := flag.Int("n", 500000, "records per run")
	runs := flag.Int("runs", 5, "runs per tool and scenario")
	partitions := flag.Int("partitions", 4, "partitions per topic")
	batch := flag.Int("batch", 4096, "mqb batch_size")
	concurrency := flag.Int("concurrency", 2, "mqb route concurrency")
	kcatBin := flag.String("kcat", "kcat", "kcat binary")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the mqb runs of scenario only")
	memprofile := flag.String("memprofile", "", "write a heap profile (allocations and what is in use) after the mqb runs of scenario only")
	only := flag.String("only", "", "run one scenario: publish (file → kafka) or consume (kafka → file)")
	kcatHeader := flag.Bool("kcat-header", false, "kcat sends each record with an mq_bridge.message_id header of the size mqb's sink writes (one fixed UUID's text), as mqb must (the delivery spec: identity across a broker hop)")
	mqbcBin := flag.String("mqbc", "", "publish with this mqbc binary as a whole process (mqbc run on a .mqb file, timed like kcat: start-up, exit and rusage included) instead of the runtime in this process")
	flag.Parse()
	// mqb runs routes with GOGC=50 unless the environment sets GOGC
	// (cmd/mqbc/memory.go); so do its runs here, or its peak RSS would be
	// that of Go's default, which mqbc does not use.
	gogc := os.Getenv("GOGC")
	if gogc == "" {
		debug.SetGCPercent(50)
		gogc = "50"
	}
	if _, err := exec.LookPath(*kcatBin); err != nil {
		log.Fatalf("kcat not found (apt-get install -y kcat): %v", err)
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		log.Fatalf("/usr/bin/time measures kcat (apt-get install -y time): %v", err)
	}
	dir, err := os.MkdirTemp("", "mqb-bench-kafka")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	brokers, brokerPID, stop := startBroker(dir, *partitions)
	defer stop()
	fmt.Printf("broker %s (mqb-testbroker), %d partitions per topic\n", brokers, *partitions)

	input := filepath.Join(dir, "orders.jsonl")
	size := generate(input, *n)
	fmt.Printf("input: %d records, %.1f MB; mqb runs with GOGC=%s\n", *n, float64(size)/1e6, gogc)

	// file → Kafka
	var mqbW, kcatW, allocs, cpu, kcatCPU, brokerMQB, brokerKcat []float64
	var kcatRSS, mqbRSS int64
	for i := range *runs {
		topic := fmt.Sprintf("w-mqb-%d", i)
		createTopic(brokers, topic, *partitions)
		before, brokerBefore := readUsage(), processCPU(brokerPID)
		var child childUsage
		d := timeIt(func() {
			if *mqbcBin != "" {
				child = runPublishProcess(dir, *mqbcBin, input, brokers, topic, *batch, *concurrency, i)
				return
			}
			defer profile(*cpuprofile, *only == "publish")()
			runPublish(dir, input, brokers, topic, *batch, *concurrency, i)
		})
		heapProfile(*memprofile, *only == "publish")
		used := readUsage().since(before)
		brokerMQB = append(brokerMQB, float64((processCPU(brokerPID)-brokerBefore).Nanoseconds())/float64(*n))
		checkCount(brokers, topic, *partitions, *n)
		mqbW = append(mqbW, float64(*n)/d.Seconds())
		allocs = append(allocs, float64(used.mallocs)/float64(*n))
		if *mqbcBin != "" {
			used.cpu = child.cpu
			mqbRSS = max(mqbRSS, child.maxRSS)
		}
		cpu = append(cpu, float64(used.cpu.Nanoseconds())/float64(*n))

		topic = fmt.Sprintf("w-kcat-%d", i)
		createTopic(brokers, topic, *partitions)
		var kcatUsed childUsage
		brokerBefore = processCPU(brokerPID)
		d = timeIt(func() {
			args := []string{"-P", "-b", brokers, "-t", topic, "-l", "-X", "acks=all"}
			if *kcatHeader {
				args = append(args, "-H", "mq_bridge.message_id="+kcatMessageID)
			}
			kcatUsed = runTimed(dir, *kcatBin, append(args, input)...)
		})
		brokerKcat = append(brokerKcat, float64((processCPU(brokerPID)-brokerBefore).Nanoseconds())/float64(*n))
		checkCount(brokers, topic, *partitions, *n)
		kcatW = append(kcatW, float64(*n)/d.Seconds())
		kcatCPU = append(kcatCPU, float64(kcatUsed.cpu.Nanoseconds())/float64(*n))
		kcatRSS = max(kcatRSS, kcatUsed.maxRSS)
	}
	report("file → kafka", mqbW, kcatW)
	fmt.Printf("%-14s mqb %.2f µs CPU/record, kcat %.2f µs CPU/record, mqb/kcat by CPU %.2f   (runs: mqb %v, kcat %v ns)\n",
		"", median(cpu)/1e3, median(kcatCPU)/1e3, median(kcatCPU)/median(cpu), rounded(cpu), rounded(kcatCPU))
	fmt.Printf("%-14s broker %.2f µs CPU/record serving mqb, %.2f serving kcat\n",
		"", median(brokerMQB)/1e3, median(brokerKcat)/1e3)
	if *mqbcBin != "" {
		fmt.Printf("%-14s mqb (mqbc run) peak RSS %d MiB; kcat peak RSS %d MiB\n", "", mqbRSS>>20, kcatRSS>>20)
	} else {
		fmt.Printf("%-14s mqb %.2f allocs/record, peak RSS %d MiB (this process); kcat peak RSS %d MiB\n",
			"", median(allocs), peakRSS()>>20, kcatRSS>>20)
	}
	if *only == "publish" {
		return
	}

	// Kafka → JSON-lines file, reading the topics kcat wrote in the first
	// scenario (each read once by mqb and once by kcat).
	var mqbR, kcatR []float64
	for i := range *runs {
		topic := fmt.Sprintf("w-kcat-%d", i)
		out := filepath.Join(dir, fmt.Sprintf("out-mqb-%d.jsonl", i))
		d := timeIt(func() {
			defer profile(*cpuprofile, *only == "consume")()
			runConsume(dir, out, brokers, topic, *batch, *concurrency, size, i)
		})
		heapProfile(*memprofile, *only == "consume")
		mqbR = append(mqbR, float64(*n)/d.Seconds())

		out = filepath.Join(dir, fmt.Sprintf("out-kcat-%d.jsonl", i))
		d = timeIt(func() {
			f, err := os.Create(out)
			if err != nil {
				log.Fatal(err)
			}
			cmd := exec.Command(*kcatBin, "-C", "-b", brokers, "-t", topic, "-o", "beginning", "-e", "-q", "-D", "\n")
			cmd.Stdout, cmd.Stderr = f, os.Stderr
			if err := cmd.Run(); err != nil {
				log.Fatalf("kcat -C: %v", err)
			}
			f.Sync()
			f.Close()
		})
		if st, _ := os.Stat(out); st.Size() != size {
			log.Fatalf("kcat wrote %d bytes, want %d", st.Size(), size)
		}
		kcatR = append(kcatR, float64(*n)/d.Seconds())
	}
	report("kafka → file", mqbR, kcatR)
}

// profile starts a CPU profile into path (appending a run number) when on.
func profile(path string, on bool) func() {
	if path == "" || !on {
		return func() {}
	}
	profileRun++
	f, err := os.Create(fmt.Sprintf("%s.%d", path, profileRun))
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

var profileRun int

// heapProfile writes the heap profile so far into path (appending a run
// number) when on: go tool pprof -sample_index=alloc_space shows what the
// mqb runs allocated, inuse_space what they left live.
func heapProfile(path string, on bool) {
	if path == "" || !on {
		return
	}
	heapRun++
	f, err := os.Create(fmt.Sprintf("%s.%d", path, heapRun))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		log.Fatal(err)
	}
}

var heapRun int

// kcatMessageID is the header value kcat sends with -kcat-header: a
// UUID v7's text, as long as the one mqb's sink writes on each record.
const kcatMessageID = "0190f2a4-7b3c-7def-8123-456789abcdef"

func report(name string, mqb, kcat []float64) {
	m, k := median(mqb), median(kcat)
	fmt.Printf("%-14s mqb %9.0f rec/s   kcat %9.0f rec/s   mqb/kcat %.2f   (runs: mqb %v, kcat %v)\n",
		name, m, k, m/k, rounded(mqb), rounded(kcat))
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func timeIt(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// runTimed runs a command to its end under /usr/bin/time and returns what
// it spent, as time measured it.
func runTimed(dir, name string, args ...string) childUsage {
	out := filepath.Join(dir, "time.out")
	args = append([]string{"-f", "%U %S %M", "-o", out, name}, args...)
	cmd := exec.Command("/usr/bin/time", args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		log.Fatal(err)
	}
	u, err := parseTime(string(b))
	if err != nil {
		log.Fatalf("%s: %v", out, err)
	}
	return u
}

// startBroker builds and starts cmd/mqb-testbroker, in memory.
func startBroker(dir string, partitions int) (string, int, func()) {
	bin := filepath.Join(dir, "mqb-testbroker")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mqb-testbroker")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		log.Fatalf("build mqb-testbroker (run from the module root): %v", err)
	}
	addr := filepath.Join(dir, "addr")
	cmd := exec.Command(bin, "-partitions", fmt.Sprint(partitions), "-addr-file", addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	for range 200 {
		if b, err := os.ReadFile(addr); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return strings.TrimSpace(string(b)), cmd.Process.Pid, func() { cmd.Process.Kill(); cmd.Wait() }
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Kill()
	log.Fatal("mqb-testbroker did not start")
	return "", 0, nil
}

func createTopic(brokers, topic string, partitions int) {
	client := &kafka.Client{Addr: kafka.TCP(brokers), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(context.Background(), &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}}})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range resp.Errors {
		if e != nil {
			log.Fatalf("create topic %s: %v", topic, e)
		}
	}
}

func checkCount(brokers, topic string, partitions, n int) {
	total := 0
	for p := range partitions {
		conn, err := kafka.DialLeader(context.Background(), "tcp", brokers, topic, p)
		if err != nil {
			log.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			log.Fatal(err)
		}
		total += int(last)
	}
	if total != n {
		log.Fatalf("topic %s holds %d records, want %d", topic, total, n)
	}
}

func generate(path string, n int) int64 {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		fmt.Fprintf(w, `{"order_id":"o-%d","amount":%d,"customer":"c-%d","note":"order number %d of the benchmark"}`+"\n", i, i%1000, i%5000, i)
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(path)
	return st.Size()
}

func node(id, role, kind string, attrs map[string]plan.Value) plan.Node {
	return plan.Node{ID: id, Role: role, Kind: kind, Attrs: attrs}
}

func str(s string) plan.Value { return plan.Value{Type: plan.TString, Str: s} }

func routePlan(name string, batch, concurrency int, nodes ...plan.Node) plan.Plan {
	var edges []plan.Edge
	for i := 1; i < len(nodes); i++ {
		edges = append(edges, plan.Edge{From: nodes[i-1].ID, To: nodes[i].ID})
	}
	return plan.Plan{Version: plan.Version, Routes: []plan.Route{{Name: name, Guarantee: plan.AtLeastOnce,
		BatchSize: batch, Concurrency: concurrency, Nodes: nodes, Edges: edges}}}
}

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// runPublish is file → kafka sink (acks from all in-sync replicas).
func runPublish(dir, input, brokers, topic string, batch, concurrency, i int) {
	p := routePlan("publish", batch, concurrency,
		node("n0", plan.RoleSource, "file", map[string]plan.Value{"path": str(input),
			"checkpoint_store": str("pebble://" + filepath.Join(dir, fmt.Sprintf("state-w-%d", i)))}),
		node("n1", plan.RoleSink, "kafka", map[string]plan.Value{"url": str(brokers), "topic": str(topic)}))
	if _, err := runtime.Run(context.Background(), p, runtime.Options{Logger: quiet}); err != nil {
		log.Fatal(err)
	}
}

// runPublishProcess is runPublish as mqb's users run it: mqbc run on a
// .mqb file holding the same route, a process of its own timed as kcat
// is (its start-up, its exit and its CPU as /usr/bin/time reports them).
func runPublishProcess(dir, mqbc, input, brokers, topic string, batch, concurrency, i int) childUsage {
	file := filepath.Join(dir, fmt.Sprintf("publish-%d.mqb", i))
	src := fmt.Sprintf(`route publish {
  batch_size  = %d
  concurrency = %d
  from file { path = %q }
  to kafka {
    url   = %q
    topic = %q
  }
}
`, batch, concurrency, input, brokers, topic)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		log.Fatal(err)
	}
	return runTimed(dir, mqbc, "run", "--progress", "off", "--state", filepath.Join(dir, fmt.Sprintf("mqbc-state-%d", i)), file)
}

// runConsume is kafka source → JSON-lines file, until the file holds every
// record (the source never ends by itself), then a graceful drain.
func runConsume(dir, out, brokers, topic string, batch, concurrency int, size int64, i int) {
	p := routePlan("consume", batch, concurrency,
		node("n0", plan.RoleSource, "kafka", map[string]plan.Value{"url": str(brokers), "topic": str(topic),
			"checkpoint_store": str("pebble://" + filepath.Join(dir, fmt.Sprintf("state-r-%d", i)))}),
		node("n1", plan.RoleSink, "file", map[string]plan.Value{"path": str(out)}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := runtime.Run(ctx, p, runtime.Options{Logger: quiet})
		done <- err
	}()
	for {
		if st, err := os.Stat(out); err == nil && st.Size() >= size {
			break
		}
		select {
		case err := <-done:
			log.Fatalf("consume ended early: %v", err)
		case <-time.After(2 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	if st, _ := os.Stat(out); st.Size() != size {
		log.Fatalf("mqb wrote %d bytes, want %d", st.Size(), size)
	}
}
