// Package genroutes writes generated .mqb files of many routes, for the
// build benchmarks (compiler's BenchmarkBuild, bench/build).
package genroutes

import (
	"fmt"
	"strings"
)

// Routes writes n routes of a realistic mix, all of which compile
// without diagnostics: a file into SQL with id, dedup, filter and map, a
// Kafka topic into SQL, and a file into positional parts.
func Routes(n int) []byte {
	var sb strings.Builder
	for i := range n {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&sb, `route orders_%d {
  guarantee effectively_once
  from file { path = "in/orders_%d.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup_%d", ttl = 1h, keep = true }
  filter payload.total > 0 && payload.kind in ["a", "b"]
  map {
    total = payload.total * 2
    customer = lower(payload.customer)
  }
  retry { attempts = 3 }
  dlq { to file { path = "out/orders_%d.dlq.jsonl" } }
  to sql {
    url = "postgres://mqb:pw@127.0.0.1/shop"
    insert_query = """
      INSERT INTO orders_%d (id, body, total)
      VALUES (${meta["mqb.id"]}, ${payload.body}, ${payload.total})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`, i, i, i, i, i)
		case 1:
			fmt.Fprintf(&sb, `route load_%d {
  guarantee effectively_once
  from kafka { url = "127.0.0.1:9092", topic = "orders_%d", group_id = "loader_%d" }
  id payload.order_id
  to sql {
    url = "sqlite://out/orders_%d.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, body TEXT NOT NULL, total REAL)"
    insert_query = """
      INSERT INTO orders (id, body, total)
      VALUES (${meta["mqb.id"]}, ${payload.body}, ${payload.total})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`, i, i, i, i)
		default:
			fmt.Fprintf(&sb, `route parts_%d {
  from file { path = "in/events_%d.jsonl" }
  filter payload.level != "debug"
  to file { path = "out/parts_%d", name_by = source_position }
}
`, i, i, i)
		}
	}
	return []byte(sb.String())
}
