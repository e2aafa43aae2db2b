//go:build soundness

package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Seed 30014 (-source redis): a route whose start-up premise fails (its
// table has no unique index on the columns its INSERT OR IGNORE needs;
// here there is no table at all)
// stops every run within milliseconds, before it writes anything; the
// killed run then agrees with the clean one, and the harness used to call
// the route ok. Nothing was tested: it is inconclusive, with the failure.
func TestStartupFailureTestsNothing(t *testing.T) {
	c := &Case{Name: "startup-failure", Seed: 7, Kills: 3}
	c.Input = genData(rand.New(rand.NewPCG(7, 7)), 500)
	c.Source = `route r {
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to sql {
    url          = "sqlite://out/r.db"
    insert_query = """INSERT OR IGNORE INTO t (id, qty) VALUES (${payload.id}, ${payload.qty})"""
  }
}
`
	c.Routes = []RouteShape{{Name: "r", Source: c.Source, Override: effectivelyOnce, Artifacts: []Artifact{
		{Kind: "dlq", Path: "out/r.dlq.jsonl", Group: "r/dlq"},
		{Kind: "table", Path: "out/r.db", Table: "t", Group: "t"},
	}}}
	res, err := checker.Check(c)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != "" {
		t.Fatalf("rejected by build: %s", res.Rejected)
	}
	if res.Clean.exitCode == 0 || res.Final.exitCode == 0 {
		t.Fatalf("clean run %v, last killed run %v: want both failing at start-up", res.Clean, res.Final)
	}
	if len(res.CleanFailed) != 1 || res.CleanFailed[0].Which != cleanNoKill || len(res.Findings) != 0 {
		t.Fatalf("want the route inconclusive, its clean run failed before any kill:\n%s", report(res))
	}
	if line := summaryLine(res); !strings.Contains(line, "INCONCLUSIVE") {
		t.Errorf("summary line: %s", line)
	}
	if rep := report(res); !strings.Contains(rep, "nothing was tested") || !strings.Contains(rep, "no such table") {
		t.Errorf("the report does not say nothing was tested, and why:\n%s", rep)
	}
}
