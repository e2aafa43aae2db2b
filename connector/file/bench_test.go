package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/runtime"
)

// BenchmarkFileToFileText is the file → file passthrough bench/compare
// times against cat (format = text, name_by = write_time), in process, so
// that a CPU profile shows the per-record costs of the source and sink:
//
//	go test -run XXX -bench FileToFileText -cpuprofile cpu.out ./connector/file
func BenchmarkFileToFileText(b *testing.B) {
	const n = 200000
	dir := b.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	f, err := os.Create(in)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, `{"order_id":"o-%07d","amount":%d,"customer":"c-%05d","body":"order number %d with some text"}`+"\n", i, i%997, i%50000, i)
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(in)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	opts := runtime.Options{Logger: slog.New(slog.DiscardHandler)}
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := plantest.FileRoute("bench", in, filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", i)), "", filepath.Join(b.TempDir(), "state"))
		p.Routes[0].Nodes[0].Attrs["format"] = enumV("text")
		p.Routes[0].BatchSize = 1024
		before := cpuTime()
		b.StartTimer()
		rs, err := runtime.Run(context.Background(), p, opts)
		b.StopTimer()
		cpu += cpuTime() - before
		if err != nil {
			b.Fatal(err)
		}
		if out := rs.Routes[0].Out; out != n {
			b.Fatalf("out %d, want %d", out, n)
		}
	}
	// CPU time says more than wall time on a shared machine.
	b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "records/CPU-s")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
