package redis

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

// addOrders appends orders o-from … o-(to-1) to stream, each
// {"order_id":"o-i","amount":i}, in pipelines of 500; stamp gives the
// mq_bridge.message_id field of order i ("" for none).
func addOrders(t testing.TB, c *goredis.Client, stream string, from, to int, stamp func(i int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for lo := from; lo < to; lo += 500 {
		pipe := c.Pipeline()
		for i := lo; i < min(lo+500, to); i++ {
			vals := []any{"payload", fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, i, i), "origin", "test"}
			if stamp != nil {
				if id := stamp(i); id != "" {
					vals = append(vals, "mq_bridge.message_id", id)
				}
			}
			pipe.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: vals})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// pendingCount is the number of entries group has read from stream and
// not acknowledged.
func pendingCount(t testing.TB, c *goredis.Client, stream, group string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.XPending(ctx, stream, group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count
}

// toSQLite is the `to` block of an effectively-once SQLite sink of the
// orders table in db: each order once, by order_id.
func toSQLite(db string) string {
	return fmt.Sprintf(`to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL, msgid TEXT, origin TEXT, entry TEXT)"
    insert_query = """INSERT INTO orders (id, amount, msgid, origin, entry)
      VALUES (${payload.order_id}, ${payload.amount}, ${message_id}, ${meta["origin"]}, ${meta["mqb.src.id"]})
      ON CONFLICT (id) DO NOTHING"""
  }`, db)
}

// sourcePlan compiles a route "consume" from stream of the server at url,
// as group, into to, with extra lines (steps, attributes) in the route.
func sourcePlan(t testing.TB, url, stream, group, attrs, extra, to string) plan.Plan {
	t.Helper()
	src := fmt.Sprintf(`route consume {
  batch_size = 64
  from redis {
    url             = %q
    stream          = %q
    group           = %q
    source_metadata = true
    %s
  }
  %s
  %s
}
`, url, stream, group, attrs, extra, to)
	return plantest.Compile(t, src)
}

// dlqBlock is a dlq step writing to the file at path.
func dlqBlock(path string) string {
	return fmt.Sprintf(`dlq { to file { path = %q } }`, path)
}

func dbIn(t testing.TB) string { return filepath.Join(t.TempDir(), "orders.db") }

// hasReason reports whether one of the DLQ lines' errors contains want.
func hasReason(lines []plantest.DLQLine, want string) bool {
	for _, l := range lines {
		if strings.Contains(l.Error, want) {
			return true
		}
	}
	return false
}
