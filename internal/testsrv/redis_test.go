package testsrv_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// TestRedis: what the server acknowledged survives a graceful restart and
// a SIGKILL on the same port, and its command line names its directory,
// which the orphan check of .ci/extra.d goes by.
func TestRedis(t *testing.T) {
	start := time.Now()
	srv := testsrv.NewRedis(t)
	t.Logf("Redis ready in %s: %s", time.Since(start), srv.URL())
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, stop := range []func(testing.TB){srv.Stop, srv.Kill} {
		if err := c.XAdd(ctx, &goredis.XAddArgs{Stream: "s", Values: []any{"n", i}}).Err(); err != nil {
			t.Fatal(err)
		}
		stop(t)
		srv.Start(t)
		n, err := c.XLen(ctx, "s").Result()
		if err != nil || n != int64(i+1) {
			t.Fatalf("after restart %d: %d entries (%v), want %d", i, n, err, i+1)
		}
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid := ""
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "process_id:"); ok {
			pid = v
		}
	}
	cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if want := "mqb-testsrv-" + strconv.Itoa(os.Getpid()) + "-"; !strings.Contains(string(cmdline), want) {
		t.Errorf("command line %q does not name %s…", cmdline, want)
	}
}
