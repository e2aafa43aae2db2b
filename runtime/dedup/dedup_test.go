package dedup

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

func TestReserveExpiryAndTTL(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	type op struct {
		do   string // reserve | promote | release | reopen
		keys []string
		at   time.Duration // offset from t0
		want []Verdict
		ttl  time.Duration
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"new then repeat in same call", []op{
			{do: "reserve", keys: []string{"a", "b", "a"}, want: []Verdict{New, New, InFlight}},
		}},
		{"reservation holds within expiry", []op{
			{do: "reserve", keys: []string{"a"}, want: []Verdict{New}},
			{do: "reserve", keys: []string{"a"}, at: 4 * time.Second, want: []Verdict{InFlight}},
		}},
		{"reservation holds however long its batch is in flight", []op{
			{do: "reserve", keys: []string{"a"}, want: []Verdict{New}},
			{do: "reserve", keys: []string{"a"}, at: 5 * time.Second, want: []Verdict{InFlight}},
			{do: "reserve", keys: []string{"a"}, at: 10 * time.Minute, want: []Verdict{InFlight}},
		}},
		{"processed within ttl", []op{
			{do: "reserve", keys: []string{"a"}, want: []Verdict{New}},
			{do: "promote", keys: []string{"a"}, at: time.Second, ttl: time.Hour},
			{do: "reserve", keys: []string{"a"}, at: 30 * time.Minute, want: []Verdict{Processed}},
		}},
		{"processed expires after ttl", []op{
			{do: "reserve", keys: []string{"a"}, want: []Verdict{New}},
			{do: "promote", keys: []string{"a"}, ttl: time.Hour},
			{do: "reserve", keys: []string{"a"}, at: time.Hour + time.Second, want: []Verdict{New}},
		}},
		{"release frees at once", []op{
			{do: "reserve", keys: []string{"a"}, want: []Verdict{New}},
			{do: "release", keys: []string{"a"}},
			{do: "reserve", keys: []string{"a"}, at: time.Millisecond, want: []Verdict{New}},
		}},
		{"processed survives reopen", []op{
			{do: "reserve", keys: []string{"a", "b"}, want: []Verdict{New, New}},
			{do: "promote", keys: []string{"a"}, ttl: time.Hour},
			{do: "reopen"},
			// b was reserved by the previous opening (a process that died):
			// free at once, not after 5 s.
			{do: "reserve", keys: []string{"a", "b"}, at: time.Second, want: []Verdict{Processed, New}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			for i, o := range tc.ops {
				now := t0.Add(o.at)
				switch o.do {
				case "reserve":
					got := make([]Verdict, len(o.keys))
					if err := s.Reserve(o.keys, now, got); err != nil {
						t.Fatal(err)
					}
					for j := range got {
						if got[j] != o.want[j] {
							t.Errorf("op %d key %q: got %v, want %v", i, o.keys[j], got[j], o.want[j])
						}
					}
				case "promote":
					if err := s.Promote(o.keys, now, o.ttl); err != nil {
						t.Fatal(err)
					}
				case "release":
					if err := s.Release(o.keys); err != nil {
						t.Fatal(err)
					}
				case "reopen":
					if err := s.Sync(); err != nil {
						t.Fatal(err)
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if s, err = Open(dir); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

func TestSweep(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Unix(1_800_000_000, 0)
	v := make([]Verdict, 3)
	if err := s.Reserve([]string{"short", "long", "other"}, t0, v); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote([]string{"short"}, t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote([]string{"long", "other"}, t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	n, err := s.Sweep(t0.Add(2 * time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("sweep deleted %d (err %v), want 1", n, err)
	}
	if err := s.Reserve([]string{"short", "long"}, t0.Add(3*time.Minute), v[:2]); err != nil {
		t.Fatal(err)
	}
	if v[0] != New || v[1] != Processed {
		t.Errorf("after sweep: %v %v, want new processed", v[0], v[1])
	}
}

// A store that stays open sweeps as it goes: once a pass is due, each
// Promote deletes expired keys a chunk at a time, and never a key promoted
// again meanwhile.
func TestSweepWhileRunning(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Now()
	const old = 3*sweepChunk + 17
	keys := make([]string, old)
	for i := range keys {
		keys[i] = fmt.Sprintf("old-%05d", i)
	}
	if err := s.Promote(keys, t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote([]string{"keep"}, t0, time.Hour); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		it, err := s.h.DB.NewIter(&pebble.IterOptions{LowerBound: allLower, UpperBound: allUpper})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		return n
	}
	// Before a pass is due nothing is deleted.
	if err := s.Promote([]string{"x"}, t0.Add(2*time.Minute), time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != old+2 {
		t.Fatalf("%d keys before the pass is due, want %d", n, old+2)
	}
	// Due: each Promote sweeps a chunk; old-00005 is promoted again in the
	// first step, which reads it as expired.
	later := t0.Add(SweepEvery + time.Minute)
	if err := s.Promote([]string{"old-00005"}, later, time.Hour); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := s.Promote([]string{fmt.Sprintf("new-%d", i)}, later, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n, want := count(), 1+1+1+4; n != want { // keep, x, old-00005, new-*
		t.Errorf("%d keys after the pass, want %d", n, want)
	}
	v := make([]Verdict, 3)
	if err := s.Reserve([]string{"old-00005", "old-00006", "keep"}, later, v); err != nil {
		t.Fatal(err)
	}
	if v[0] != Processed || v[1] != New || v[2] != Processed {
		t.Errorf("verdicts %v, want processed new processed", v)
	}
	if s.res.cursor != nil {
		t.Errorf("the pass did not end")
	}
}
