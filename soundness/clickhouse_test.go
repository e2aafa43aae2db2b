//go:build soundness

package main

import (
	"fmt"
	"math/rand/v2"
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
// FINAL on a ReplacingMergeTree). Three routes the compiler calls
// at-least-once (concurrency 2, no version), all planted effectively-once,
// read the file: into a plain MergeTree (nothing collapses a repeat) and
// into a ReplacingMergeTree sorted by a per-delivery column (a repeat gets
// another sorting key) each must be reported with extra rows once a kill
// made the file source deliver records again; into a ReplacingMergeTree
// sorted by the stable line, whose merges are stopped, the control must
// not be: read with FINAL, its repeats collapse all the same (read
// without, it is reported).
// One file, so one clean run and one series of kills serve all three.
func TestClickHouseCatchesPlanted(t *testing.T) {
	routes := []struct {
		name, engine, x string
		caught          bool
	}{
		{"merge", "MergeTree ORDER BY id", "payload.region", true},
		{"by_now", "ReplacingMergeTree ORDER BY (id, x)", "string(now().UnixNano())", true},
		{"control", "ReplacingMergeTree ORDER BY id SETTINGS parts_to_delay_insert = 100000, parts_to_throw_insert = 100000", "payload.region", false},
	}
	c := &Case{Name: "planted-clickhouse", Seed: 7, Kills: 6}
	c.Input = genData(rand.New(rand.NewPCG(7, 7)), 4000)
	var file strings.Builder
	for _, r := range routes {
		src := fmt.Sprintf(`route %[1]s {
  batch_size  = 8
  concurrency = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/%[1]s.dlq.jsonl" } }
  to clickhouse {
    url   = %[2]q
    table = %[1]q
    columns {
      id  = meta["mqb.src.line"]
      qty = payload.qty
      x   = %[3]s
    }
  }
}
`, r.name, chPlaceholder, r.x)
		file.WriteString(src)
		art := Artifact{Kind: "table", Path: chPlaceholder, Table: r.name, Group: r.name}
		if strings.Contains(r.x, "now()") {
			art.Volatile = []string{"x"}
		}
		c.Setup = append(c.Setup, SetupSQL{DB: chPlaceholder, SQL: fmt.Sprintf("CREATE TABLE %s (id String, qty Int64, x String) ENGINE = %s", r.name, r.engine)})
		if !r.caught {
			// No merges: only FINAL collapses the control's repeats.
			c.Setup = append(c.Setup, SetupSQL{DB: chPlaceholder, SQL: "SYSTEM STOP MERGES " + r.name})
		}
		c.Routes = append(c.Routes, RouteShape{Name: r.name, Source: src, Override: effectivelyOnce, Artifacts: []Artifact{art,
			{Kind: "dlq", Path: "out/" + r.name + ".dlq.jsonl", Group: r.name + "/dlq"}}})
	}
	c.Source = file.String()
	res := checkUntilKilled(t, c)
	if res.Clean.exitCode != 0 {
		t.Fatalf("the clean run failed (exit %d)", res.Clean.exitCode)
	}
	for i, r := range routes {
		if !strings.Contains(strings.Join(res.Verdicts[i].Reasons, "\n"), "with concurrency 2 records of one key can land") {
			t.Fatalf("route %s: the compiler's verdict does not rest on concurrency 2 without a version: %v", r.name, res.Verdicts[i].Reasons)
		}
		var found *Finding
		for _, f := range res.Findings {
			if f.Route == r.name {
				found = &f
			}
		}
		switch {
		case r.caught && (found == nil || !strings.Contains(found.Diff, "+ ")):
			t.Errorf("route %s, told effectively-once into %s, was not reported with extra rows:\n%s", r.name, r.engine, report(res))
		case !r.caught && found != nil:
			t.Errorf("route %s into %s, read with FINAL, was reported:\n%s", r.name, r.engine, report(res))
		case r.caught:
			t.Logf("route %s caught, as it should be: %s", r.name, firstLine(found.Diff, 3))
		}
	}
}
