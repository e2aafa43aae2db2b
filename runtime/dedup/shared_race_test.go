package dedup

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSharedStoreReservePromoteRace: two Stores on one Pebble directory
// and one namespace (two routes sharing a dedup on purpose) reserve and
// promote the same keys at once. A key may be new to only one of them.
// Reserve reads the database before it looks at the shared reservations;
// a promotion by the other Store landing in between (its write after the
// read, its reservation dropped before the look) made the key look new to
// both, and the record was delivered twice.
func TestSharedStoreReservePromoteRace(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenNamespace(dir, "shared")
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenNamespace(dir, "shared")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	const n = 20000
	won := make([][]bool, 2)
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b} {
		won[i] = make([]bool, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := make([]Verdict, 1)
			for k := range n {
				key := []string{fmt.Sprintf("key-%d", k)}
				if err := s.Reserve(key, time.Now(), v); err != nil {
					t.Error(err)
					return
				}
				if v[0] == New {
					won[i][k] = true
					if err := s.Promote(key, time.Now(), time.Hour); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	both := 0
	for k := range n {
		if won[0][k] && won[1][k] {
			both++
		}
	}
	if both > 0 {
		t.Fatalf("%d of %d keys were new to both stores", both, n)
	}
}
