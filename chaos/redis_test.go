//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// The Redis Streams pairs: a stream read by a consumer group (every run
// is the same consumer, so what a killed run read and did not acknowledge
// is read again by the next), and the file source into a stream.

var redisSource = sourceCase{name: "redis", follows: true, setup: func(t *testing.T, dir string) sourceSetup {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	return sourceSetup{from: fmt.Sprintf(`redis { url = %q, stream = "in", group = "chaos" }`, srv.URL()),
		emit: func(t *testing.T, lines string) { xadd(t, c, "in", lines) }}
}}

var redisSink = sinkCase{"redis", atLeastOnce, false, func(t *testing.T, dir string) (string, []string, func(*testing.T) map[string]int) {
	srv := testsrv.NewRedis(t)
	c := srv.Client(t)
	to := fmt.Sprintf(`redis { url = %q, stream = "orders" }`, srv.URL())
	return to, nil, func(t *testing.T) map[string]int {
		return countRedis(t, c, "orders")
	}
}}

// xadd appends each line of lines to stream as an entry's payload field,
// in one pipeline.
func xadd(t *testing.T, c *goredis.Client, stream, lines string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pipe := c.Pipeline()
	for _, l := range strings.Split(strings.TrimSuffix(lines, "\n"), "\n") {
		pipe.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []any{"payload", l}})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("xadd to %s: %v", stream, err)
	}
}

// countRedis reads every entry of stream.
func countRedis(t *testing.T, c *goredis.Client, stream string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := c.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range msgs {
		payload, _ := m.Values["payload"].(string)
		countIDs(t, "stream "+stream, []byte(payload), got)
	}
	return got
}

// redisPairs are the Redis Streams rows of the matrix, appended at its
// end: the stream into SQLite and into part files named by entry id, and
// the file source into a stream.
func redisPairs() []pair {
	var out []pair
	for _, sc := range sinks {
		if sc.name == "sqlite" || sc.name == "file (source_position)" {
			out = append(out, pair{src: redisSource, sink: sc})
		}
	}
	return append(out, pair{src: fileSource, sink: redisSink})
}
