//go:build soundness

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sampledKinds are the sources of more.go TestMoreSources checks: those
// SOUNDNESS_SOURCES lists ("all": every one), else two drawn from the
// run's seed, so that CI pays for two sources a run and covers them all
// over a few runs. The seed is SOUNDNESS_SOURCE_SEED, or the clock's.
func sampledKinds(t *testing.T) ([]string, uint64) {
	seed := uint64(time.Now().Unix())
	if v, err := strconv.ParseUint(os.Getenv("SOUNDNESS_SOURCE_SEED"), 10, 64); err == nil {
		seed = v
	}
	switch v := os.Getenv("SOUNDNESS_SOURCES"); v {
	case "all":
		return moreKinds, seed
	case "":
		kinds := slices.Clone(moreKinds)
		r := rand.New(rand.NewPCG(seed, 0x5a5e))
		r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		return kinds[:2], seed
	default:
		var kinds []string
		for k := range strings.SplitSeq(v, ",") {
			if !slices.Contains(moreKinds, k) {
				t.Fatalf("SOUNDNESS_SOURCES: unknown source %q (want all or a comma list of %s)", k, strings.Join(moreKinds, ", "))
			}
			kinds = append(kinds, k)
		}
		return kinds, seed
	}
}

// Generated routes over the sources of issue #18 (Redis streams, AMQP
// queues, MQTT sessions, an s3:// prefix, http_server, a MongoDB
// collection), with the sinks and steps the
// generator draws for the file, run cleanly and under SIGKILLs: an
// effectively-once verdict must show nothing lost or duplicated, an
// at-least-once one nothing lost. SOUNDNESS_SOURCES=all checks every
// source; SOUNDNESS_SOURCE_SEED repeats a run.
func TestMoreSources(t *testing.T) {
	kinds, seed := sampledKinds(t)
	kills := envInt("SOUNDNESS_KILLS", 3)
	t.Logf("sources %s from seed %d (rerun with SOUNDNESS_SOURCE_SEED=%d; SOUNDNESS_SOURCES=all checks every one)", strings.Join(kinds, ", "), seed, seed)
	for _, k := range kinds {
		t.Run(k, func(t *testing.T) {
			c, err := generateFrom(seed, kills, k)
			if err != nil {
				t.Fatal(err)
			}
			res := checkGenerated(t, c)
			if res == nil {
				return
			}
			if res.Unfed != "" {
				t.Errorf("the harness could not feed the %s source: %s", k, res.Unfed)
			}
		})
	}
}

// Over the new sources the harness still catches a false verdict: a route
// keyed on now() (a new row on every delivery), told effectively-once,
// must be reported with extra rows once a kill made a source deliver a
// record again.
func TestMoreSourcesCatchPlanted(t *testing.T) {
	for _, k := range []string{brokerRedis, brokerS3} {
		t.Run(k, func(t *testing.T) {
			c := &Case{Name: "planted-" + k, Seed: 7, Kills: 4, Broker: k}
			c.Input = genData(rand.New(rand.NewPCG(7, 7)), 3000)
			c.Source = fmt.Sprintf(`route planted {
  batch_size = 2
  from %s
  dlq { to file { path = "out/planted.dlq.jsonl" } }
  to sql {
    url          = "sqlite://out/planted.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER)"
    insert_query = """INSERT INTO t (id, qty) VALUES (${string(now().UnixNano())}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"""
  }
}
`, c.moreFrom("planted"))
			c.Routes = []RouteShape{{Name: "planted", Source: c.Source, Override: effectivelyOnce, Artifacts: []Artifact{
				{Kind: "dlq", Path: "out/planted.dlq.jsonl", Group: "planted/dlq", ByContent: true},
				{Kind: "table", Path: "out/planted.db", Table: "t", Group: "t", Volatile: []string{"id"}},
			}}}
			res, err := checker.Check(c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Kills == 0 {
				t.Fatalf("no kill landed: %s", summaryLine(res))
			}
			if len(res.Findings) != 1 || !strings.Contains(res.Findings[0].Diff, "+ ") {
				t.Errorf("a now()-keyed route over %s told effectively-once was not reported with extra rows:\n%s", k, report(res))
			} else {
				t.Logf("caught, as it should be:\n%s", firstLine(report(res), 8))
			}
		})
	}
}
