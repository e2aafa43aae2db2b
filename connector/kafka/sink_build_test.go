package kafka

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
)

// appendUUIDText writes what uuid's String does, after what buf held.
func TestAppendUUIDText(t *testing.T) {
	ids := []uuid.UUID{uuid.Nil, uuid.Max, uuid.MustParse("0190a3c4-5e6f-7a8b-9cde-f0123456789a")}
	for i, u := range ids {
		got := appendUUIDText([]byte("before"), u)
		if string(got) != "before"+u.String() {
			t.Errorf("%d: %q, want %q", i, got, "before"+u.String())
		}
	}
}

// TestPartitionOfMatchesHashBalancer: hashPartition puts every key where
// kafka-go's Hash balancer, which the sink used before (and sarama's
// producers use), does: keyed records must not move partition.
func TestPartitionOfMatchesHashBalancer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	keys := [][]byte{{}, []byte("a"), []byte("key-o-1"), []byte("\xff\x00\x80"), bytes.Repeat([]byte("x"), 1000)}
	for range 3000 {
		k := make([]byte, rng.IntN(40))
		for i := range k {
			k[i] = byte(rng.UintN(256))
		}
		keys = append(keys, k)
	}
	var counts []int
	for n := 1; n <= 64; n++ {
		counts = append(counts, n)
	}
	counts = append(counts, 100, 127, 1000, 4096, 1<<16+1)
	for _, n := range counts {
		ps := make([]int, n)
		for i := range ps {
			ps[i] = i
		}
		var h kafkago.Hash
		for _, k := range keys {
			if got, want := hashPartition(k, n), h.Balance(kafkago.Message{Key: k}, ps...); got != want {
				t.Fatalf("key %q of %d partitions: partition %d, want %d", k, n, got, want)
			}
		}
	}
}

// BenchmarkPlacement: what choosing a record's partition costs, by
// kafka-go's Hash balancer (as the sink did) and by the sink's own
// placement, from writers on every P (a route's concurrent workers).
func BenchmarkPlacement(b *testing.B) {
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key-o-%d", i))
	}
	ps := []int{0, 1, 2, 3}
	var h kafkago.Hash
	b.Run("balancer/keyed", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_ = h.Balance(kafkago.Message{Key: keys[i&1023]}, ps...)
			}
		})
	})
	b.Run("balancer/keyless", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = h.Balance(kafkago.Message{}, ps...)
			}
		})
	})
	b.Run("sink/keyed", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				_ = hashPartition(keys[i&1023], len(ps))
			}
		})
	})
	b.Run("sink/keyless", func(b *testing.B) {
		// As Write does: one atomic step per write of 1024 records.
		var s kafkaSink
		b.RunParallel(func(pb *testing.PB) {
			var turn uint32
			for i := 0; pb.Next(); i++ {
				if i&1023 == 0 {
					turn = s.spread.Add(1024) - 1024
				}
				_ = int(turn % uint32(len(ps)))
				turn++
			}
		})
	})
}
