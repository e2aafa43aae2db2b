package runtime

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// idParts splits a UUIDv7 into its timestamp and its 74-bit counter
// (rand_a, rand_b), checking the version and variant bits.
func idParts(t *testing.T, id uuid.UUID) (ms int64, hi uint16, lo uint64) {
	t.Helper()
	if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		t.Fatalf("%s: version %d variant %v, want 7 and RFC 4122", id, id.Version(), id.Variant())
	}
	head := binary.BigEndian.Uint64(id[0:8])
	return int64(head >> 16), uint16(head & 0x0fff), binary.BigEndian.Uint64(id[8:16]) & (1<<62 - 1)
}

// The minter's steps from a known state: a new millisecond reseeds, the
// same or an earlier one counts on, a full counter carries, and an
// exhausted one moves to the next millisecond.
func TestIDMinterSteps(t *testing.T) {
	const full = 1<<62 - 1
	for _, tc := range []struct {
		name   string
		ms     int64 // the minter's state before: timestamp and counter
		hi     uint16
		lo     uint64
		now    int64
		wantMS int64
		// wantHi and wantLo are the counter expected, or -1 for a fresh
		// draw (top bit clear).
		wantHi, wantLo int64
	}{
		{"first id", 0, 0, 0, 1_700_000_000_000, 1_700_000_000_000, -1, -1},
		{"new millisecond", 5, 3, 9, 6, 6, -1, -1},
		{"same millisecond", 5, 3, 9, 5, 5, 3, 10},
		{"clock stepped back", 5, 3, 9, 2, 5, 3, 10},
		{"rand_b full", 5, 3, full, 5, 5, 4, 0},
		{"counter exhausted", 5, 0x0fff, full, 5, 6, -1, -1},
		{"timestamp uses 48 bits", 1<<48 - 1, 1, 1, 1<<48 - 1, 1<<48 - 1, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &idMinter{ms: tc.ms, hi: tc.hi, lo: tc.lo}
			ms, hi, lo := idParts(t, g.mint(tc.now))
			if ms != tc.wantMS {
				t.Errorf("timestamp %d, want %d", ms, tc.wantMS)
			}
			if tc.wantHi < 0 {
				if hi&0x0800 != 0 {
					t.Errorf("fresh counter %03x…: top bit set, leaving no room to count", hi)
				}
			} else if int64(hi) != tc.wantHi || int64(lo) != tc.wantLo {
				t.Errorf("counter %03x:%x, want %03x:%x", hi, lo, tc.wantHi, tc.wantLo)
			}
			if g.ms != ms || g.hi != hi || g.lo != lo {
				t.Errorf("minter kept %d %03x:%x, returned %d %03x:%x", g.ms, g.hi, g.lo, ms, hi, lo)
			}
		})
	}
}

// Two minters seeded in one millisecond start from different counters
// (a fixed seed would make two processes mint the same ids).
func TestIDMinterSeedsAtRandom(t *testing.T) {
	seen := map[uuid.UUID]bool{}
	for range 100 {
		var g idMinter
		id := g.mint(42)
		if seen[id] {
			t.Fatalf("two fresh minters gave %s", id)
		}
		seen[id] = true
	}
}

// Records minting on several goroutines at once, one at a time or a
// write's worth at a time (MintMessageIDs), get ids that are all
// distinct, each goroutine's strictly increasing, each a valid UUIDv7.
func TestFreshMessageIDsUnique(t *testing.T) {
	const workers, each, batch = 4, 20000, 100
	ids := make([][]uuid.UUID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if w%2 == 0 {
				for range each {
					var r Record
					ids[w] = append(ids[w], r.msgIDValue())
				}
				return
			}
			recs := make([]*Record, batch)
			for range each / batch {
				for i := range recs {
					recs[i] = &Record{}
				}
				MintMessageIDs(recs)
				for _, r := range recs {
					ids[w] = append(ids[w], r.msgIDValue())
				}
			}
		})
	}
	wg.Wait()
	seen := make(map[uuid.UUID]bool, workers*each)
	for w, run := range ids {
		if len(run) != each {
			t.Fatalf("goroutine %d minted %d ids, want %d", w, len(run), each)
		}
		for i, id := range run {
			idParts(t, id)
			if seen[id] {
				t.Fatalf("id %s minted twice", id)
			}
			seen[id] = true
			if i > 0 && bytes.Compare(run[i-1][:], id[:]) >= 0 {
				t.Fatalf("goroutine %d: id %s after %s, want increasing", w, id, run[i-1])
			}
		}
	}
}

// MintMessageIDs leaves a record that has an id (given or minted) alone.
func TestMintMessageIDsKeepsIDs(t *testing.T) {
	given := uuid.MustParse("6d71622d-756e-4e65-8374-2d6964000001")
	var a, b, c Record
	b.SetMessageID(given)
	minted := c.msgIDValue()
	MintMessageIDs([]*Record{&a, &b, &c})
	if !a.hasMsgID {
		t.Fatal("record without an id has none after MintMessageIDs")
	}
	if b.msgIDValue() != given || c.msgIDValue() != minted {
		t.Errorf("ids changed: %s and %s, want %s and %s", b.msgIDValue(), c.msgIDValue(), given, minted)
	}
	if bytes.Compare(minted[:], a.msgID[:]) >= 0 {
		t.Errorf("id minted later %s is not after %s", a.msgID, minted)
	}
}

// A record keeps the id it was minted, and one given with SetMessageID.
func TestMessageIDMintedOnce(t *testing.T) {
	var r Record
	first := r.MessageID()
	if again := r.MessageID(); again != first {
		t.Errorf("second MessageID %s, first %s", again, first)
	}
	given := uuid.MustParse("6d71622d-756e-4e65-8374-2d6964000001")
	r.SetMessageID(given)
	if got := r.msgIDValue(); got != given {
		t.Errorf("after SetMessageID: %s, want %s", got, given)
	}
}

// BenchmarkFreshMessageID is the cost of a fresh id, against what it
// replaced: uuid.NewV7 drawing from uuid's random pool.
func BenchmarkFreshMessageID(b *testing.B) {
	b.Run("minter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r Record
			_ = r.msgIDValue()
		}
	})
	b.Run("MintMessageIDs", func(b *testing.B) {
		recs := make([]*Record, 4096)
		for i := range recs {
			recs[i] = &Record{}
		}
		b.ReportAllocs()
		for b.Loop() {
			for _, r := range recs {
				r.hasMsgID = false
			}
			MintMessageIDs(recs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/id")
	})
	b.Run("uuid.NewV7-pool", func(b *testing.B) {
		uuid.EnableRandPool()
		defer uuid.DisableRandPool()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := uuid.NewV7(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
