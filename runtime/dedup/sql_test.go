package dedup

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

func TestMain(m *testing.M) { testsrv.Main(m) }

// sqlStoreURLs gives, per server, a function that starts (or shares) it for the
// subtest it is called with: a server that is not installed skips that
// subtest only, never the parent from inside a subtest.
func sqlStoreURLs() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"postgres": func(t *testing.T) string { return testsrv.Postgres(t) },
		"mariadb":  func(t *testing.T) string { return testsrv.MariaDBDatabase(t).URL },
	}
}

func openSQLPair(t *testing.T, url string) (*SQLStore, *SQLStore) {
	t.Helper()
	a, err := OpenSQL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenSQL(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func reserve(t *testing.T, s *SQLStore, now time.Time, keys ...string) string {
	t.Helper()
	v := make([]Verdict, len(keys))
	if err := s.Reserve(keys, now, v); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range v {
		out = append(out, x.String())
	}
	return strings.Join(out, " ")
}

// The Pebble store's lifecycle, seen from two instances sharing the table.
func TestSQLStoreLifecycle(t *testing.T) {
	for name, newURL := range sqlStoreURLs() {
		t.Run(name, func(t *testing.T) {
			a, b := openSQLPair(t, newURL(t))
			a.Expiry, b.Expiry = 300*time.Millisecond, 300*time.Millisecond
			long := strings.Repeat("k", 500)
			now := time.Now()
			if got := reserve(t, a, now, "x", "y", "x", long); got != "new new in-flight new" {
				t.Errorf("first reserve: %s", got)
			}
			// Another instance's live reservation is not a duplicate yet:
			// its holder may have died before delivering the record.
			if got := reserve(t, b, now, "x", "z", long); got != "held elsewhere new held elsewhere" {
				t.Errorf("other instance while in flight: %s", got)
			}
			if err := a.Promote([]string{"x", long}, now, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := a.Release([]string{"y"}); err != nil {
				t.Fatal(err)
			}
			if got := reserve(t, b, now, "x", "y", long); got != "processed new processed" {
				t.Errorf("after promote and release: %s", got)
			}
			// b's reservation of z is never promoted, and b lives on: b
			// renews it, so past its expiry it is still held.
			time.Sleep(1000 * time.Millisecond)
			if got := reserve(t, a, time.Now(), "z", "x"); got != "held elsewhere processed" {
				t.Errorf("b alive, past the first expiry: %s", got)
			}
			if err := b.RenewErr(); err != nil {
				t.Errorf("renewal: %v", err)
			}
			// To b a repeat is in flight.
			if got := reserve(t, b, time.Now(), "z"); got != "in-flight" {
				t.Errorf("b's own reservation: %s", got)
			}
			// b dies: its reservation expires and a takes the key.
			b.Close()
			time.Sleep(400 * time.Millisecond)
			if got := reserve(t, a, time.Now(), "z", "x"); got != "new processed" {
				t.Errorf("after b died and the expiry: %s", got)
			}
			// A processed key past its ttl is new again.
			if err := a.Promote([]string{"z"}, time.Now(), 50*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if got := reserve(t, a, time.Now(), "z"); got != "new" {
				t.Errorf("after ttl: %s", got)
			}
		})
	}
}

// A reservation that runs further past its expiry than any live renewal
// sets is refused as the other instance's clock being ahead, rather than
// waited on.
func TestSQLStoreClockAhead(t *testing.T) {
	for name, newURL := range sqlStoreURLs() {
		t.Run(name, func(t *testing.T) {
			a, b := openSQLPair(t, newURL(t))
			if got := reserve(t, a, time.Now(), "k"); got != "new" {
				t.Fatalf("first reserve: %s", got)
			}
			v := make([]Verdict, 1)
			err := b.Reserve([]string{"k"}, time.Now().Add(-(a.Expiry + MaxClockLead + time.Second)), v)
			if err == nil || !strings.Contains(err.Error(), "clock ahead") {
				t.Fatalf("a reservation %s past the expiry: %v, want the other clock called ahead", MaxClockLead+time.Second, err)
			}
			// Within the lead it is only held.
			if got := reserve(t, b, time.Now().Add(-time.Second), "k"); got != "held elsewhere" {
				t.Errorf("a second behind: %s", got)
			}
		})
	}
}

// A store renewing its reservations every few milliseconds while another
// instance reserves, promotes and releases the same keys: every statement
// locks rows in key order, so none deadlocks.
func TestSQLStoreRenewalRace(t *testing.T) {
	for name, newURL := range sqlStoreURLs() {
		t.Run(name, func(t *testing.T) {
			a, b := openSQLPair(t, newURL(t))
			a.Expiry, b.Expiry = 30*time.Millisecond, 30*time.Millisecond
			var wg sync.WaitGroup
			stop := time.Now().Add(2 * time.Second)
			for i, s := range []*SQLStore{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := 0; time.Now().Before(stop); round++ {
						var keys []string
						for k := range 200 {
							keys = append(keys, fmt.Sprintf("key-%d", (k*7+round*13+i*5)%300))
						}
						v := make([]Verdict, len(keys))
						if err := s.Reserve(keys, time.Now(), v); err != nil {
							t.Error(err)
							return
						}
						var mine []string
						for j, x := range v {
							if x == New {
								mine = append(mine, keys[j])
							}
						}
						time.Sleep(15 * time.Millisecond) // renewals run meanwhile
						half := len(mine) / 2
						if err := s.Release(mine[:half]); err != nil {
							t.Error(err)
							return
						}
						if err := s.Promote(mine[half:], time.Now(), time.Millisecond); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, s := range []*SQLStore{a, b} {
				if err := s.RenewErr(); err != nil {
					t.Errorf("renewal: %v", err)
				}
			}
		})
	}
}

// Two instances reserving overlapping keys at once: each key is new to
// exactly one of them.
func TestSQLStoreConcurrentReserve(t *testing.T) {
	for name, newURL := range sqlStoreURLs() {
		t.Run(name, func(t *testing.T) {
			a, b := openSQLPair(t, newURL(t))
			const n = 2000
			won := make([]map[string]bool, 2)
			var wg sync.WaitGroup
			for i, s := range []*SQLStore{a, b} {
				won[i] = map[string]bool{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for start := 0; start < n; start += 100 {
						var keys []string
						for k := start; k < start+100; k++ {
							keys = append(keys, fmt.Sprintf("key-%d", (k*7+i*13)%n))
						}
						v := make([]Verdict, len(keys))
						if err := s.Reserve(keys, time.Now(), v); err != nil {
							t.Error(err)
							return
						}
						for j, x := range v {
							if x == New {
								won[i][keys[j]] = true
							}
						}
					}
				}()
			}
			wg.Wait()
			for k := range won[0] {
				if won[1][k] {
					t.Errorf("key %s new to both instances", k)
				}
			}
			if len(won[0])+len(won[1]) != n {
				t.Errorf("%d + %d keys won, want %d in all", len(won[0]), len(won[1]), n)
			}
		})
	}
}

// Promote sweeps rows whose time ran out, at most once a sweepEvery.
func TestSQLStoreSweeps(t *testing.T) {
	a, _ := openSQLPair(t, testsrv.Postgres(t))
	now := time.Now()
	reserve(t, a, now, "old", "new")
	if err := a.Promote([]string{"old"}, now, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	later := now.Add(2 * sweepEvery)
	if err := a.Promote([]string{"new"}, later, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := reserve(t, a, later, "old", "new"); got != "new processed" {
		t.Errorf("after the sweep: %s", got)
	}
	var n int
	err := a.db.Tx(context.Background(), func(q sqlkv.Querier) error {
		return q.Query(context.Background(), `SELECT count(*) FROM mqb_dedup_keys WHERE k = 'old' AND state = 2`, func(scan func(...any) error) error { return scan(&n) })
	})
	if err != nil || n != 0 {
		t.Errorf("the expired processed row survived the sweep (%d, %v)", n, err)
	}
}

// Instances that start at once on a fresh database all open the store:
// PostgreSQL fails all but one of racing CREATE TABLE IF NOT EXISTS with a
// catalog error (on the relation or on its row type), which counts as
// "it exists".
func TestSQLStoreOpenRace(t *testing.T) {
	for name, url := range sqlStoreURLs() {
		t.Run(name, func(t *testing.T) {
			for round := range 5 {
				u := url(t)
				const n = 8
				errs := make([]error, n)
				var start, wg sync.WaitGroup
				start.Add(1)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start.Wait()
						s, err := OpenSQL(context.Background(), u)
						if err == nil {
							s.Close()
						}
						errs[i] = err
					}()
				}
				start.Done()
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d, instance %d: %v", round, i, err)
					}
				}
			}
		})
	}
}
