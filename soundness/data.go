package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// genData writes the input of a case: JSON lines with exact repeats, later
// revisions of a key (same id, other qty), records without an id, ids and
// fields past 2^53, and malformed lines. Every line carries seq, its line
// number, so a part file's lines stay distinguishable.
func genData(rng *rand.Rand, n int) string {
	var b strings.Builder
	regions := []string{"eu", "us", "apac"}
	keys := max(1, n*3/4)
	var lines []string
	for i := 0; len(lines) < n; i++ {
		seq := len(lines)
		switch r := rng.IntN(100); {
		case r < 3:
			// Malformed: not JSON, truncated JSON, JSON that is not an object.
			bad := []string{`not json`, `{"id":"k-1","qty":`, `[1,2,3]`, `42`, `{"id":}`}
			lines = append(lines, bad[rng.IntN(len(bad))])
			continue
		case r < 13 && seq > 0:
			// An exact repeat of an earlier line: a resend.
			lines = append(lines, lines[rng.IntN(seq)])
			continue
		}
		var f []string
		switch r := rng.IntN(100); {
		case r < 5:
			// keyless
		case r < 12:
			// A numeric id past 2^53: float64 cannot tell neighbours apart.
			f = append(f, fmt.Sprintf(`"id":%d`, uint64(12345678901234567000)+uint64(rng.IntN(keys))))
		default:
			f = append(f, fmt.Sprintf(`"id":"k-%d"`, rng.IntN(keys)))
		}
		f = append(f,
			fmt.Sprintf(`"seq":%d`, seq),
			fmt.Sprintf(`"qty":%d`, 1+rng.IntN(9)),
			fmt.Sprintf(`"big":%d`, uint64(9007199254740993)+2*uint64(seq)),
			fmt.Sprintf(`"region":%q`, regions[rng.IntN(len(regions))]),
			fmt.Sprintf(`"body":"b%d"`, seq))
		if rng.IntN(10) < 7 {
			f = append(f, fmt.Sprintf(`"tag":"t%d"`, rng.IntN(5)))
		}
		lines = append(lines, "{"+strings.Join(f, ",")+"}")
	}
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
