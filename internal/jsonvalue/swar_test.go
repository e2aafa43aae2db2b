package jsonvalue

import (
	"math/rand/v2"
	"testing"
)

// plainASCIIRef is plainASCII a byte at a time: the first byte at or after
// i that is a quote, a backslash, below 0x20 or above 0x7f.
func plainASCIIRef(data []byte, i int) int {
	for ; i < len(data); i++ {
		if c := data[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
	}
	return i
}

// TestPlainASCII: the word-at-a-time scan stops exactly where the byte
// loop would, for every byte value at every place in a word (the first
// special byte, false positives above it from borrows), and on random
// input; in the last eight bytes it may stop early, never late.
func TestPlainASCII(t *testing.T) {
	check := func(data []byte, from int) {
		t.Helper()
		got, want := plainASCII(data, from), plainASCIIRef(data, from)
		if len(data)-want >= 8 && got != want || got > want {
			t.Fatalf("plainASCII(%q, %d) = %d, want %d", data, from, got, want)
		}
		if got < want && plainASCIIRef(data, got) != want {
			t.Fatalf("plainASCII(%q, %d) = %d stops before %d on a plain byte", data, from, got, want)
		}
	}
	for c := range 256 {
		for at := range 16 {
			data := []byte("abcdefghijklmnopqrstuvwx")
			data[at] = byte(c)
			check(data, 0)
			// a special byte below, so borrows run into c's byte
			data[0] = 0
			check(data, 1)
			for _, below := range []byte{'"', '\\', 0x1f, 0x00, 0x80, 0x20, 0x21, 0x5b, 0x5d} {
				if at > 0 {
					data[at-1] = byte(below)
					check(data, 0)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("abc XYZ09\"\\\x00\x1f\x7f\x80\xc3\xa9\xff ~}{")
	for range 20000 {
		data := make([]byte, r.IntN(40))
		for i := range data {
			if r.IntN(4) == 0 {
				data[i] = alphabet[r.IntN(len(alphabet))]
			} else {
				data[i] = byte('a' + r.IntN(26))
			}
		}
		check(data, 0)
		if len(data) > 0 {
			check(data, r.IntN(len(data)))
		}
	}
}

// BenchmarkValid validates the lines the Kafka and compare benchmarks
// publish, as a route does before its sink writes them.
func BenchmarkValid(b *testing.B) {
	line := []byte(`{"order_id":"o-123456","amount":456,"customer":"c-3456","note":"order number 123456 of the benchmark"}`)
	d := NewDecoder()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if err := d.Valid(line); err != nil {
			b.Fatal(err)
		}
	}
}
