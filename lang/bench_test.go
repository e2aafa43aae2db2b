package lang

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse1000Routes parses a generated 1,000-route file: the front
// end's share of `mqbc build` on a large project.
func BenchmarkParse1000Routes(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, `route r%d {
  concurrency = 2
  from file { path = "in%d.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  filter payload.total > 0 && payload.kind in ["a", "b"]
  map { total = payload.total * 2 }
  retry { attempts = 3 }
  to sql {
    url = "postgres://mqb:pw@127.0.0.1/shop"
    insert_query = """
      INSERT INTO orders (id, body, total)
      VALUES (${meta["mqb.id"]}, ${payload.body}, ${payload.total})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`, i, i)
	}
	src := []byte(sb.String())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, d := Parse("bench.mqb", src); len(d) > 0 {
			b.Fatal(d)
		}
	}
}
