// Command compare times mqb against the tools its users would otherwise
// reach for, as whole processes on the same generated input, alternating
// the two commands of each pair run by run so a noisy machine slows both
// alike. It prints each side's median records/s, the ratio mqb/reference
// and each side's median peak RSS.
//
//	go run ./bench/compare -n 1000000 -runs 5
//	go run ./bench/compare -only sqlite,sqlite-dedup -runs 5
//	go run ./bench/compare -only sqlite -pg postgres://u@127.0.0.1:5432/db
//	go run ./bench/compare -only sqlite -mqbc old=/tmp/mqbc-old,new=/tmp/mqbc-new
//
// With several mqbc binaries (-mqbc name=path,…), each run of a pair runs
// every binary's side in turn, then the reference: one row per binary,
// measured against the same reference runs in one session.
//
// Pairs:
//
//   - file: file → file passthrough (format = text, name_by = write_time)
//     against cat;
//   - sqlite: file → id → dedup → SQLite ON CONFLICT DO NOTHING against a
//     Python loop doing the same (a set of seen ids, executemany in one
//     transaction); the compiler leaves this dedup out, as the conflict
//     clause absorbs the repeats (sqlite-dedup runs it, keep = true);
//   - postgres (with -pg): file → PostgreSQL ON CONFLICT DO NOTHING into a
//     table keyed by id, and bulk_copy into one without a key, against
//     psql's \copy of the same lines into a one-column table (psql moves
//     the bytes; mqb parses each line, binds its fields and keeps the
//     checkpoint);
//   - postgres-cap (with -pg): the same upsert against the server's own
//     best at it, measured from psql: \copy of the rows, already split
//     into columns (untimed), into a temporary table, then one INSERT …
//     SELECT … ORDER BY … ON CONFLICT (id) DO NOTHING from it, in one
//     transaction: the best one statement does (mqb's split writes
//     send the rows of new keys by COPY instead, and pass it);
//   - postgres-keyed (with -pg): the same upsert against psql's \copy of
//     the rows it leaves (the first of each order_id, split into columns
//     and deduplicated beforehand, untimed) into the same keyed table: the
//     fastest load of that table, its unique index checked row by row;
//   - benthos (with BENTHOS=/path/to/binary): file → file through Benthos
//     (or Redpanda Connect) against mqb.
//
// A reference whose program is missing (python3, psql) is skipped with a
// line saying so. mqbc is built from this checkout unless -mqbc names one.
package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mqb-dev/mqb/bench/internal/orders"
)

// cmdSpec is one side of a pair: how to prepare a fresh run directory and
// the command to time in it.
type cmdSpec struct {
	name  string
	setup func(dir string) error // may be nil
	argv  func(dir string) []string
	stdin string // a file fed as standard input, if any
	out   string // a file the command's standard output goes to, if any
}

type pair struct {
	key      string // what -only names
	name     string
	mqb, ref cmdSpec
}

type sample struct {
	rate float64 // records/s
	rss  int64   // KiB
	cpu  float64 // CPU-seconds, user and system
}

// perCPU is the records moved per CPU-second: on a shared or busy machine
// it says more about the cost per record than the wall-clock rate does.
func (s sample) perCPU(n int) float64 {
	if s.cpu <= 0 {
		return 0
	}
	return float64(n) / s.cpu
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run is the command: it parses args and prints the table to stdout.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	n := fs.Int("n", 500000, "records in the generated input")
	runs := fs.Int("runs", 5, "runs of each side of a pair (alternating)")
	only := fs.String("only", "", "run the pairs named, comma-separated: file, file-sync, sqlite, sqlite-dedup, postgres, postgres-copy, postgres-cap, postgres-keyed, benthos")
	mqbc := fs.String("mqbc", "", "the mqbc binary (default: build ./cmd/mqbc), or several to compare in one run: name=path,name=path")
	pg := fs.String("pg", "", "a PostgreSQL URL for the postgres pair (a table bench_orders is created and dropped)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "mqb-compare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *mqbc == "" {
		*mqbc = filepath.Join(dir, "mqbc")
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			return fmt.Errorf("find the module root: %v", err)
		}
		build := exec.Command("go", "build", "-o", *mqbc, "./cmd/mqbc")
		build.Dir = strings.TrimSpace(string(root))
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build mqbc: %v", err)
		}
	}
	bins, err := parseBinaries(*mqbc)
	if err != nil {
		return err
	}
	input := filepath.Join(dir, "orders.jsonl")
	if err := orders.Generate(input, *n); err != nil {
		return err
	}
	st, _ := os.Stat(input)
	fmt.Fprintf(stdout, "input: %d records, %.1f MB; %d runs per side, alternating\n\n", *n, float64(st.Size())/1e6, *runs)

	pairsOf := func(mqbc string) []pair {
		pairs := []pair{filePair(mqbc, input), fileSyncPair(mqbc, input), sqlitePair(mqbc, input, false), sqlitePair(mqbc, input, true)}
		if *pg != "" {
			pairs = append(pairs, pgPairs(mqbc, input, *pg)...)
		}
		if b := os.Getenv("BENTHOS"); b != "" {
			pairs = append(pairs, benthosPair(mqbc, input, b))
		}
		return pairs
	}
	pairs := pairsOf(bins[0].path)
	// mqbs[i][j] is pair i's mqb side run by binary j.
	mqbs := make([][]cmdSpec, len(pairs))
	for _, b := range bins {
		for i, p := range pairsOf(b.path) {
			mqbs[i] = append(mqbs[i], p.mqb)
		}
	}
	fmt.Fprintf(stdout, "%-18s %14s %14s %8s %12s %12s %9s %9s %14s %14s\n", "pair", "mqb rec/s", "ref rec/s", "ratio", "mqb RSS", "ref RSS",
		"mqb CPU", "ref CPU", "mqb rec/CPU-s", "ref rec/CPU-s")
	for i, p := range pairs {
		if *only != "" && !slices.Contains(strings.Split(*only, ","), p.key) {
			continue
		}
		if missing := missingProgram(p.ref); missing != "" {
			fmt.Fprintf(stdout, "%-18s skipped: %s is not installed\n", p.name, missing)
			continue
		}
		ms := make([][]sample, len(bins))
		var rs []sample
		for r := range *runs {
			for j, b := range bins {
				m, err := timeRun(dir, fmt.Sprintf("%s-mqb%d-%d", p.name, j, r), mqbs[i][j], *n)
				if err != nil {
					return fmt.Errorf("%s, mqb %s: %v", p.name, b.name, err)
				}
				ms[j] = append(ms[j], m)
			}
			ref, err := timeRun(dir, fmt.Sprintf("%s-ref-%d", p.name, r), p.ref, *n)
			if err != nil {
				return fmt.Errorf("%s, %s: %v", p.name, p.ref.name, err)
			}
			rs = append(rs, ref)
		}
		ref := median(rs)
		for j, b := range bins {
			m, name := median(ms[j]), p.name
			if b.name != "" {
				name += " " + b.name
			}
			fmt.Fprintf(stdout, "%-18s %14.0f %14.0f %7.2fx %9s MiB %9s MiB %8.2fs %8.2fs %14.0f %14.0f   (vs %s; per CPU-s %.2fx)\n",
				name, m.rate, ref.rate, m.rate/ref.rate, mib(m.rss), mib(ref.rss), m.cpu, ref.cpu, m.perCPU(*n), ref.perCPU(*n), p.ref.name, m.perCPU(*n)/ref.perCPU(*n))
		}
	}
	return nil
}

// mib renders a peak RSS in KiB (rusage's unit) as MiB to a tenth: whole
// MiB, rounded down, hid a route at 40.8 MiB as "40" against a 40 MiB
// target.
func mib(kib int64) string { return strconv.FormatFloat(float64(kib)/1024, 'f', 1, 64) }

// binary is an mqbc binary to time; name is "" for the only one.
type binary struct{ name, path string }

// parseBinaries reads -mqbc: one path, or name=path pairs separated by
// commas.
func parseBinaries(flag string) ([]binary, error) {
	if !strings.Contains(flag, "=") {
		return []binary{{path: flag}}, nil
	}
	var bins []binary
	for _, f := range strings.Split(flag, ",") {
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("-mqbc %q: want name=path,name=path", flag)
		}
		bins = append(bins, binary{name, path})
	}
	return bins, nil
}

// timeRun runs spec once in a fresh directory and returns its rate over n
// records and its peak RSS.
func timeRun(root, name string, spec cmdSpec, n int) (sample, error) {
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	if spec.setup != nil {
		if err := spec.setup(dir); err != nil {
			return sample{}, fmt.Errorf("setup: %w", err)
		}
	}
	argv := spec.argv(dir)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if spec.stdin != "" {
		f, err := os.Open(spec.stdin)
		if err != nil {
			return sample{}, err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if spec.out != "" {
		f, err := os.Create(filepath.Join(dir, spec.out))
		if err != nil {
			return sample{}, err
		}
		defer f.Close()
		cmd.Stdout = f
	}
	start := time.Now()
	err := cmd.Run()
	el := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, tail(stderr.String(), 2000))
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	cpu := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return sample{rate: float64(n) / el.Seconds(), rss: rss, cpu: cpu}, nil
}

func median(s []sample) sample {
	rates := make([]float64, len(s))
	rss := make([]int64, len(s))
	cpu := make([]float64, len(s))
	for i, x := range s {
		rates[i], rss[i], cpu[i] = x.rate, x.rss, x.cpu
	}
	slices.Sort(rates)
	slices.Sort(rss)
	slices.Sort(cpu)
	return sample{rate: rates[len(rates)/2], rss: rss[len(rss)/2], cpu: cpu[len(cpu)/2]}
}

// missingProgram names the reference's program when it is not on PATH.
func missingProgram(spec cmdSpec) string {
	prog := spec.argv("/")[0]
	if filepath.IsAbs(prog) {
		if _, err := os.Stat(prog); err != nil {
			return prog
		}
		return ""
	}
	if _, err := exec.LookPath(prog); err != nil {
		return prog
	}
	return ""
}

// writeMQB writes a pipeline file into dir and returns mqbc's argv to run it.
func writeMQB(mqbc, dir, src string) []string {
	path := filepath.Join(dir, "bench.mqb")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		log.Fatal(err)
	}
	return []string{mqbc, "run", "--log-level", "warn", "--progress", "off", path}
}

func filePair(mqbc, input string) pair {
	return pair{
		key:  "file",
		name: "file→file",
		mqb: cmdSpec{name: "mqb", argv: func(dir string) []string {
			return writeMQB(mqbc, dir, fmt.Sprintf(`route bench {
  from file { path = %q, format = text }
  to file { path = "out", name_by = write_time }
}
`, input))
		}},
		ref: cmdSpec{name: "cat", argv: func(string) []string { return []string{"cat", input} }, out: "out.jsonl"},
	}
}

// fileSyncPair is file → file against a copy made durable as mqb makes
// its output before saving a position: dd's fsync of the output at the
// end. cat never syncs, so the file pair's ratio also counts the disk's
// time to take the bytes; this one leaves that out.
func fileSyncPair(mqbc, input string) pair {
	p := filePair(mqbc, input)
	p.key, p.name = "file-sync", "file→file (sync)"
	p.ref = cmdSpec{name: "dd conv=fsync", argv: func(string) []string {
		return []string{"dd", "if=" + input, "of=out.jsonl", "bs=1M", "conv=fsync", "status=none"}
	}}
	return p
}

// sqlitePair is file → id → dedup → SQLite. The sink's ON CONFLICT (id)
// DO NOTHING on the dedup key absorbs the repeats, so the compiler leaves
// the dedup out of the plan; keep runs it anyway (the sqlite-dedup pair),
// every key looked up in and promoted to its Pebble store.
func sqlitePair(mqbc, input string, keep bool) pair {
	key, name, keepAttr := "sqlite", "file→SQLite", ""
	if keep {
		key, name, keepAttr = "sqlite-dedup", "file→SQLite dedup", ", keep = true"
	}
	return pair{
		key:  key,
		name: name,
		mqb: cmdSpec{name: "mqb", argv: func(dir string) []string {
			return writeMQB(mqbc, dir, fmt.Sprintf(`route bench {
  from file { path = %q }
  id payload.order_id
  dedup { key = meta["mqb.id"], ttl = 1h%s }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = "sqlite://orders.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER, body TEXT)"
    insert_query = "INSERT INTO orders (id, amount, body) VALUES (${meta[\"mqb.id\"]}, ${payload.amount}, ${payload.body}) ON CONFLICT (id) DO NOTHING"
  }
}
`, input, keepAttr))
		}},
		ref: cmdSpec{name: "a Python loop", argv: func(string) []string { return []string{"python3", "-c", pythonSQLite, input} }},
	}
}

// pythonSQLite is the loop a user writes instead: parse each line, skip a
// seen id, dead-letter what does not parse, insert in batches.
const pythonSQLite = `
import json, sqlite3, sys
db = sqlite3.connect("orders.db")
db.execute("PRAGMA journal_mode=WAL")
db.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER, body TEXT)")
seen, rows, dlq = set(), [], open("dlq.jsonl", "w")
def flush():
    db.executemany("INSERT INTO orders (id, amount, body) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING", rows)
    db.commit()
    rows.clear()
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
        k = r["order_id"]
    except Exception:
        dlq.write(line)
        continue
    if k in seen:
        continue
    seen.add(k)
    rows.append((k, r.get("amount"), r.get("body")))
    if len(rows) >= 1024:
        flush()
flush()
`

func pgPairs(mqbc, input, url string) []pair {
	psql := func(sql string) error {
		out, err := exec.Command("psql", url, "-q", "-c", sql).CombinedOutput()
		if err != nil {
			return fmt.Errorf("psql: %v: %s", err, out)
		}
		return nil
	}
	reset := func(string) error {
		return psql("DROP TABLE IF EXISTS bench_orders; CREATE TABLE bench_orders (id TEXT PRIMARY KEY, amount INTEGER, body TEXT)")
	}
	resetPlain := func(string) error {
		return psql("DROP TABLE IF EXISTS bench_orders; CREATE TABLE bench_orders (id TEXT, amount INTEGER, body TEXT)")
	}
	route := func(extra, attrs string) func(dir string) []string {
		return func(dir string) []string {
			return writeMQB(mqbc, dir, fmt.Sprintf(`route bench {
  from file { path = %q }
  dlq { to file { path = "dlq.jsonl" } }
  to sql {
    url          = %q
    insert_query = "INSERT INTO bench_orders (id, amount, body) VALUES (${payload.order_id}, ${payload.amount}, ${payload.body})%s"%s
  }
}
`, input, url, extra, attrs))
		}
	}
	// \copy reads the same lines as one-column text and splits them in the
	// server, so both sides parse the JSON.
	copyRef := cmdSpec{name: `psql \copy`, setup: func(string) error {
		return psql("DROP TABLE IF EXISTS bench_lines; CREATE TABLE bench_lines (l TEXT)")
	}, argv: func(string) []string {
		return []string{"psql", url, "-q", "-c", `\copy bench_lines (l) FROM '` + input + `' WITH (FORMAT text)`}
	}}
	upsert := cmdSpec{name: "mqb", setup: reset, argv: route(" ON CONFLICT (id) DO NOTHING", "")}
	return []pair{
		{key: "postgres", name: "file→PostgreSQL", mqb: upsert, ref: copyRef},
		{key: "postgres-copy", name: "file→PG bulk_copy", mqb: cmdSpec{name: "mqb", setup: resetPlain, argv: route("", "\n    bulk_copy    = true")}, ref: copyRef},
		{key: "postgres-cap", name: "file→PG vs staged", mqb: upsert, ref: stagedUpsertRef(input, url, reset)},
		{key: "postgres-keyed", name: "file→PG vs keyed", mqb: upsert, ref: keyedCopyRef(input, url, reset)},
	}
}

// stagedUpsertRef is the server's best at the upsert, run by psql: the
// rows of input that have an order_id (split into columns beforehand, in
// setup, untimed) are copied into a temporary table and inserted from it
// in read order with the route's conflict clause, in one transaction.
func stagedUpsertRef(input, url string, reset func(string) error) cmdSpec {
	return cmdSpec{name: `psql \copy + INSERT … SELECT`, setup: func(dir string) error {
		if err := reset(dir); err != nil {
			return err
		}
		csv := filepath.Join(dir, "rows.csv")
		if err := orderRowsCSV(input, csv, false); err != nil {
			return err
		}
		script := `BEGIN;
CREATE TEMP TABLE bench_stage (id TEXT, amount INTEGER, body TEXT, ord BIGINT GENERATED ALWAYS AS IDENTITY) ON COMMIT DROP;
\copy bench_stage (id, amount, body) FROM '` + csv + `' WITH (FORMAT csv)
INSERT INTO bench_orders (id, amount, body) SELECT id, amount, body FROM bench_stage ORDER BY ord ON CONFLICT (id) DO NOTHING;
COMMIT;
`
		return os.WriteFile(filepath.Join(dir, "staged.sql"), []byte(script), 0o644)
	}, argv: func(dir string) []string {
		return []string{"psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-f", filepath.Join(dir, "staged.sql")}
	}}
}

// keyedCopyRef is the fastest any client loads the rows the upsert
// leaves into the same keyed table: psql's \copy of the first row of
// each order_id (split into columns and deduplicated beforehand, in
// setup, untimed), the unique index checked as each row goes in.
func keyedCopyRef(input, url string, reset func(string) error) cmdSpec {
	return cmdSpec{name: `psql \copy, keyed`, setup: func(dir string) error {
		if err := reset(dir); err != nil {
			return err
		}
		return orderRowsCSV(input, filepath.Join(dir, "first.csv"), true)
	}, argv: func(dir string) []string {
		return []string{"psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-c",
			`\copy bench_orders (id, amount, body) FROM '` + filepath.Join(dir, "first.csv") + `' WITH (FORMAT csv)`}
	}}
}

// orderRowsCSV writes the rows the route would insert from the order
// lines in input (those that parse and carry an order_id) as CSV; with
// firstOnly, only the first row of each order_id (what ON CONFLICT DO
// NOTHING keeps).
func orderRowsCSV(input, out string, firstOnly bool) error {
	in, err := os.Open(input)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := csv.NewWriter(bufio.NewWriterSize(f, 1<<20))
	seen := map[string]bool{}
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var o struct {
			ID     *string `json:"order_id"`
			Amount *int64  `json:"amount"`
			Body   *string `json:"body"`
		}
		if json.Unmarshal(sc.Bytes(), &o) != nil || o.ID == nil {
			continue
		}
		if firstOnly {
			if seen[*o.ID] {
				continue
			}
			seen[*o.ID] = true
		}
		row := []string{*o.ID, "", ""}
		if o.Amount != nil {
			row[1] = strconv.FormatInt(*o.Amount, 10)
		}
		if o.Body != nil {
			row[2] = *o.Body
		}
		w.Write(row)
	}
	w.Flush()
	if err := errors.Join(sc.Err(), w.Error()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func benthosPair(mqbc, input, benthos string) pair {
	p := filePair(mqbc, input)
	p.key, p.name = "benthos", "file→file/benthos"
	p.ref = cmdSpec{name: "Benthos", argv: func(dir string) []string {
		cfg := filepath.Join(dir, "benthos.yaml")
		yaml := fmt.Sprintf("input:\n  file:\n    paths: [%q]\n    scanner:\n      lines: {}\noutput:\n  file:\n    path: out.jsonl\n    codec: lines\n", input)
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			log.Fatal(err)
		}
		return []string{benthos, "-c", cfg, "--log.level", "warn"}
	}}
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
