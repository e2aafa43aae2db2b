package nats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
)

// A route over JetStream (the broker keeps the position) whose identity
// rests on the process environment keeps the fingerprint of what it reads
// in the default state store. The source declares no checkpoint_store, and
// without --state every such route failed at start-up ("store \"\": only
// pebble://dir stores are supported"), though the build called it
// effectively-once (seed 32028 of the soundness harness).
func TestProcessPremiseInDefaultStore(t *testing.T) {
	url := testsrv.NATS(t)
	_, js, _ := natsStream(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		m := natsgo.NewMsg("orders.new")
		m.Data = fmt.Appendf(nil, `{"order_id":"o-%d","amount":%d}`, i, i)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "out.db")
	p := plantest.Compile(t, fmt.Sprintf(`route consume {
  from nats { url = %q, subject = "orders.>", stream = "ORDERS", durable = "consume" }
  id env("MQB_TEST_REGION") + "/" + payload.order_id
  to sql {
    url          = "sqlite://%s"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER)"
    insert_query = """INSERT INTO orders (id, amount) VALUES (${meta["mqb.id"]}, ${payload.amount}) ON CONFLICT (id) DO NOTHING"""
  }
}`, url, db))
	if g := p.Routes[0].Guarantee; g != plan.EffectivelyOnce {
		t.Fatalf("verdict %s", g)
	}
	opts := runtest.Options()
	opts.BaseDir = dir
	opts.Env = func(string) string { return "eu" }
	runtest.RunUntil(t, p, opts, time.Minute, func() bool {
		_, err := os.Stat(db)
		return err == nil && runtest.CountRows(t, db) == 3
	})
	if _, err := os.Stat(filepath.Join(dir, ".mqb", "state")); err != nil {
		t.Errorf("the fingerprint's store: %v", err)
	}
}
