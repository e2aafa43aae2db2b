//go:build soundness

package main

import (
	"fmt"
	"strings"
	"testing"
)

// Generated routes with clickhouse sinks (see clickhouse.go), run cleanly
// and under SIGKILLs. CI checks the first two seeds from
// SOUNDNESS_SOURCE_SEED (or the clock's) on that draw one;
// SOUNDNESS_CLICKHOUSE_SEEDS checks more.
func TestClickHouseSinks(t *testing.T) {
	clickhouseSinks = true
	defer func() { clickhouseSinks = false }()
	_, seed := sampledKinds(t)
	want := envInt("SOUNDNESS_CLICKHOUSE_SEEDS", 2)
	kills := envInt("SOUNDNESS_KILLS", 3)
	t.Logf("seeds from %d (rerun with SOUNDNESS_SOURCE_SEED=%d)", seed%100000+11, seed)
	found := 0
	for s := seed%100000 + 11; found < want; s++ {
		c, err := generate(s, kills)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Source, chPlaceholder) {
			continue
		}
		found++
		t.Run(c.Name, func(t *testing.T) {
			checkGenerated(t, c)
		})
	}
}

// The harness reads ClickHouse tables the way the verdict promises (with
// FINAL on a ReplacingMergeTree): a route the compiler calls at-least-once
// (concurrency 2, no version), planted effectively-once, must be reported
// with extra rows once a kill made the file source deliver a record again,
// into a plain MergeTree (nothing collapses a repeat) and into a
// ReplacingMergeTree sorted by a per-delivery column (a repeat gets
// another sorting key). Into a ReplacingMergeTree sorted by the stable id
// the same route, planted so, is not reported: FINAL collapses the
// repeats.
func TestClickHouseCatchesPlanted(t *testing.T) {
	for _, tc := range []struct {
		name, engine, x string
		caught          bool
	}{
		{"plain MergeTree", "MergeTree ORDER BY id", "payload.region", true},
		{"sorted by a per-delivery column", "ReplacingMergeTree ORDER BY (id, x)", "string(now().UnixNano())", true},
		{"sorted by the stable id", "ReplacingMergeTree ORDER BY id", "payload.region", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fmt.Sprintf(`route r {
  batch_size  = 2
  concurrency = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to clickhouse {
    url   = %q
    table = "t"
    columns {
      id  = meta["mqb.src.line"]
      qty = payload.qty
      x   = %s
    }
  }
}
`, chPlaceholder, tc.x)
			art := Artifact{Kind: "table", Path: chPlaceholder, Table: "t", Group: "t"}
			if strings.Contains(tc.x, "now()") {
				art.Volatile = []string{"x"}
			}
			c := rulesCase("planted-clickhouse", 7, src, art)
			c.Setup = []SetupSQL{{DB: chPlaceholder, SQL: "CREATE TABLE t (id String, qty Int64, x String) ENGINE = " + tc.engine}}
			c.Routes[0].Override = effectivelyOnce
			res := checkUntilKilled(t, c)
			if !strings.Contains(strings.Join(res.Verdicts[0].Reasons, "\n"), "with concurrency 2 records of one key can land") {
				t.Fatalf("the compiler's verdict does not rest on concurrency 2 without a version: %v", res.Verdicts[0].Reasons)
			}
			if res.Clean.exitCode != 0 {
				t.Fatalf("the clean run failed (exit %d)", res.Clean.exitCode)
			}
			caught := len(res.Findings) == 1 && strings.Contains(res.Findings[0].Diff, "+ ")
			switch {
			case tc.caught && !caught:
				t.Errorf("a route told effectively-once into %s was not reported with extra rows:\n%s", tc.engine, report(res))
			case !tc.caught && len(res.Findings) > 0:
				t.Errorf("a route into %s, read with FINAL, was reported:\n%s", tc.engine, report(res))
			case caught:
				t.Logf("caught, as it should be:\n%s", firstLine(report(res), 8))
			}
		})
	}
}
