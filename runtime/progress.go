package runtime

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// startProgress writes one line per file-source route every interval:
// records read, the rate since the last line, and how far through the file
// the reader is. The returned func stops it and writes a last line.
func startProgress(ctx context.Context, w io.Writer, every time.Duration, routes []*route) func() {
	if w == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := make([]int64, len(routes))
		lastT := time.Now()
		t := time.NewTicker(every)
		defer t.Stop()
		report := func() {
			now := time.Now()
			dt := now.Sub(lastT).Seconds()
			lastT = now
			for i, rt := range routes {
				n := rt.stats.in.Load()
				rate := float64(n-last[i]) / max(dt, 1e-9)
				last[i] = n
				line := fmt.Sprintf("%s: %d records, %.0f rec/s", rt.name, n, rate)
				if ps, ok := rt.src.(progressSource); ok {
					if read, size, ok := ps.Progress(); ok {
						line += fmt.Sprintf(", %.1f%%", 100*float64(read)/float64(size))
					}
				}
				fmt.Fprintln(w, line)
			}
		}
		for {
			select {
			case <-t.C:
				report()
			case <-ctx.Done():
				report()
				return
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}
