// Package orders writes the benchmarks' input: JSON order lines with the
// repeats, malformed lines and records without an id that real feeds have.
package orders

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
)

// Generate writes n order lines to path: ~10% repeat an earlier id, ~1%
// are malformed JSON, ~1% lack the id. The same n gives the same file.
func Generate(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	for i := range n {
		switch r := rng.IntN(100); {
		case r < 1:
			fmt.Fprintf(w, "{\"order_id\": \"o-%d\", \"amount\": oops\n", i)
		case r < 2:
			fmt.Fprintf(w, "{\"amount\": %d, \"body\": \"no id\"}\n", i)
		case r < 12 && next > 0:
			k := rng.IntN(next)
			fmt.Fprintf(w, "{\"order_id\": \"o-%d\", \"amount\": %d, \"body\": \"repeat\"}\n", k, k)
		default:
			fmt.Fprintf(w, "{\"order_id\": \"o-%d\", \"amount\": %d, \"customer\": \"c-%d\", \"body\": \"order number %d\"}\n", next, next, next%977, next)
			next++
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
