// Command build times `mqbc build` as a whole process on generated files
// of many routes: wall time, CPU time (user and system) and peak RSS, the
// median of several runs, alternating between the binaries compared so a
// shared machine's load falls on each alike.
//
//	go build -o /tmp/mqbc-new ./cmd/mqbc
//	go run ./bench/build -mqbc old=/tmp/mqbc-old,new=/tmp/mqbc-new -routes 1000,10000 -runs 3
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mqb-dev/mqb/internal/genroutes"
)

// binary is one mqbc to time, with its label.
type binary struct{ label, path string }

// sample is one run's cost.
type sample struct {
	wall, cpu time.Duration
	rssKiB    int64
}

func main() {
	bins := flag.String("mqbc", "", "binaries to compare: label=path,label=path (or one path)")
	routes := flag.String("routes", "1000,10000", "route counts of the generated files")
	runs := flag.Int("runs", 3, "runs per binary and file; the median is reported")
	flag.Parse()
	if err := run(*bins, *routes, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
}

func run(binsFlag, routesFlag string, runs int) error {
	bins, err := parseBinaries(binsFlag)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mqb-bench-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("%-8s %-8s %10s %10s %10s\n", "routes", "binary", "wall", "cpu", "peak RSS")
	for _, f := range strings.Split(routesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad route count %q", f)
		}
		src := filepath.Join(dir, fmt.Sprintf("gen_%d.mqb", n))
		if err := os.WriteFile(src, genroutes.Routes(n), 0o644); err != nil {
			return err
		}
		samples := make([][]sample, len(bins))
		for r := range runs {
			for i := range bins {
				// Alternate the order from run to run.
				j := i
				if r%2 == 1 {
					j = len(bins) - 1 - i
				}
				s, err := timeBuild(bins[j].path, src, dir)
				if err != nil {
					return fmt.Errorf("%s on %d routes: %w", bins[j].label, n, err)
				}
				samples[j] = append(samples[j], s)
			}
		}
		for i, b := range bins {
			m := median(samples[i])
			fmt.Printf("%-8d %-8s %9.2fs %9.2fs %7d MiB\n", n, b.label, m.wall.Seconds(), m.cpu.Seconds(), m.rssKiB/1024)
		}
	}
	return nil
}

func parseBinaries(s string) ([]binary, error) {
	var out []binary
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		label, path, ok := strings.Cut(part, "=")
		if !ok {
			label, path = filepath.Base(part), part
		}
		out = append(out, binary{label, path})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no binary: pass -mqbc label=path[,label=path]")
	}
	return out, nil
}

// timeBuild runs `mqbc build src -o plan.json` and returns its cost.
func timeBuild(bin, src, dir string) (sample, error) {
	cmd := exec.Command(bin, "build", src, "-o", filepath.Join(dir, "plan.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	wall := time.Since(start)
	ps := cmd.ProcessState
	s := sample{wall: wall, cpu: ps.UserTime() + ps.SystemTime()}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		s.rssKiB = ru.Maxrss
	}
	return s, nil
}

// median takes each measure's median on its own.
func median(s []sample) sample {
	pick := func(get func(sample) int64) int64 {
		v := make([]int64, len(s))
		for i, x := range s {
			v[i] = get(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return sample{
		wall:   time.Duration(pick(func(x sample) int64 { return int64(x.wall) })),
		cpu:    time.Duration(pick(func(x sample) int64 { return int64(x.cpu) })),
		rssKiB: pick(func(x sample) int64 { return x.rssKiB }),
	}
}
