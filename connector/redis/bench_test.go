package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

const benchN = 20000

// BenchmarkRedisSink: file → id → redis, an XADD per record pipelined per
// batch, into a server syncing its append-only file on every write.
func BenchmarkRedisSink(b *testing.B) {
	srv := testsrv.NewRedis(b)
	input, size := plantest.BenchInput(b, benchN)
	runtest.Bench(b, benchN, size, func(i int, state string) plan.Plan {
		return plantest.SinkPlan(input, state, 1024, plan.Node{Kind: "redis", Attrs: map[string]plan.Value{
			"url": plantest.Tmpl(plantest.Lit(srv.URL())), "stream": plantest.Tmpl(plantest.Lit(fmt.Sprintf("bench-%d", i))),
			"payload_field": plantest.Str("payload"), "max_len": plantest.Int(0)}})
	})
}

// BenchmarkRedisSourceToSQLite: a stream of benchN orders, filled before
// the clock starts, read by a group into SQLite (ON CONFLICT DO NOTHING),
// until the table holds them all.
func BenchmarkRedisSourceToSQLite(b *testing.B) {
	srv := testsrv.NewRedis(b)
	c := srv.Client(b)
	opts := runtime.Options{Logger: plantest.Logger()}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		stream := fmt.Sprintf("orders-%d", i)
		addOrders(b, c, stream, 0, benchN, nil)
		db := dbIn(b)
		p := sourcePlan(b, srv.URL(), stream, "bench", "", "", toSQLite(db))
		p.Routes[0].BatchSize = 1024
		b.StartTimer()
		run := runtest.Start(context.Background(), p, opts)
		for runtest.CountRows(b, db) != benchN {
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		run.Stop(b)
		b.StartTimer()
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkGoClientXAdd is the plain client loop the sink is set beside:
// XADD of the same payloads, pipelined 1024 at a time.
func BenchmarkGoClientXAdd(b *testing.B) {
	srv := testsrv.NewRedis(b)
	c := srv.Client(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stream := fmt.Sprintf("plain-%d", i)
		for lo := 0; lo < benchN; lo += 1024 {
			pipe := c.Pipeline()
			for j := lo; j < min(lo+1024, benchN); j++ {
				pipe.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"payload", fmt.Sprintf(`{"order_id":"o-%d","amount":%d}`, j, j)}})
			}
			if _, err := pipe.Exec(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkGoClientXReadGroup is the plain client loop the source is set
// beside: XREADGROUP 1024 at a time and XACK each batch, discarding the
// entries.
func BenchmarkGoClientXReadGroup(b *testing.B) {
	srv := testsrv.NewRedis(b)
	c := srv.Client(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		stream := fmt.Sprintf("plain-%d", i)
		addOrders(b, c, stream, 0, benchN, nil)
		if err := c.XGroupCreate(ctx, stream, "g", "0").Err(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for read := 0; read < benchN; {
			res, err := c.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{stream, ">"}, Count: 1024, Block: -1}).Result()
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, 0, len(res[0].Messages))
			for _, m := range res[0].Messages {
				ids = append(ids, m.ID)
			}
			if err := c.XAck(ctx, stream, "g", ids...).Err(); err != nil {
				b.Fatal(err)
			}
			read += len(ids)
		}
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
