package dedup

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkReservePromote measures the dedup step's cost per record on a
// store that already remembers many keys: each op reserves a batch of
// keys, some seen before (every seenEvery-th: half, or a tenth as in the
// benchmarks' generated orders) and the rest new, and promotes the new
// ones, as a route's dedup step and commit do. Reported per key.
func BenchmarkReservePromote(b *testing.B) {
	for _, seenEvery := range []int{2, 10} {
		b.Run(fmt.Sprintf("seen=1/%d", seenEvery), func(b *testing.B) { benchReservePromote(b, seenEvery) })
	}
}

func benchReservePromote(b *testing.B, seenEvery int) {
	const batch = 1024
	const preloaded = 200_000
	st, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	keys := make([]string, batch)
	verdicts := make([]Verdict, batch)
	for i := 0; i < preloaded; i += batch {
		for j := range keys {
			keys[j] = fmt.Sprintf("order-%09d", i+j)
		}
		if err := st.Reserve(keys, now, verdicts); err != nil {
			b.Fatal(err)
		}
		if err := st.Promote(keys, now, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.h.DB.Flush(); err != nil {
		b.Fatal(err)
	}
	next := preloaded
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer() // making the keys is the caller's cost
		for j := range keys {
			if j%seenEvery == 0 {
				keys[j] = fmt.Sprintf("order-%09d", (next+j)%preloaded) // seen
			} else {
				keys[j] = fmt.Sprintf("order-%09d", next+j) // new
			}
		}
		next += batch
		b.StartTimer()
		if err := st.Reserve(keys, now, verdicts); err != nil {
			b.Fatal(err)
		}
		var fresh []string
		for j, v := range verdicts {
			if v == New {
				fresh = append(fresh, keys[j])
			}
		}
		if err := st.Promote(fresh, now, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
}
