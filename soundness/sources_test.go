//go:build soundness

package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The later sources are fed, drained and read back: a route over each
// that is sound passes, and one told a verdict it does not keep is
// caught. Core NATS loses what is published while a route is down, so a
// core NATS route told effectively-once must be reported with records
// missing, and the compiler must call it at-most-once.
func TestLaterSources(t *testing.T) {
	sink := func(name string) (string, []Artifact) {
		return fmt.Sprintf(`to sql {
    url          = "sqlite://out/%[1]s.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER, big INTEGER)"
    insert_query = """INSERT INTO t (id, qty, big) VALUES (${meta["mqb.id"]}, ${payload.qty}, ${payload.big}) ON CONFLICT (id) DO NOTHING"""
  }`, name), []Artifact{
				{Kind: "dlq", Path: "out/" + name + ".dlq.jsonl", Group: name + "/dlq", ByContent: true},
				{Kind: "table", Path: "out/" + name + ".db", Table: "t", Group: "t", Mutable: []string{"qty", "big"}},
			}
	}
	for _, tc := range []struct {
		name, broker, from string
		override, want     string
		caught             bool
	}{
		{"kafka", brokerKafka, `kafka { url = "${env(\"SOUNDNESS_KAFKA_URL\")}", topic = "in" }`, "", effectivelyOnce, false},
		{"sql", brokerSQL, `sql { url = "${env(\"SOUNDNESS_PG_URL\")}", table = "src", cursor_column = "n", poll_interval = 100ms }`, "", effectivelyOnce, false},
		{"core_nats", brokerNATSCore, `nats { url = "${env(\"SOUNDNESS_NATS_URL\")}", subject = "in.records", no_jetstream = true }`, effectivelyOnce, atMostOnce, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, arts := sink(tc.name)
			src := fmt.Sprintf(`route %s {
  batch_size = 4
  from %s
  id payload.id
  dlq { to file { path = "out/%s.dlq.jsonl" } }
  %s
}
`, tc.name, tc.from, tc.name, to)
			c := &Case{Name: tc.name, Seed: 5, Kills: 2, Broker: tc.broker}
			c.Input = genData(rand.New(rand.NewPCG(5, 5)), 500)
			c.Source = src
			c.Routes = []RouteShape{{Name: tc.name, Source: src, Override: tc.override, Artifacts: arts}}
			res, err := checker.Check(c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Rejected != "" {
				t.Fatalf("rejected: %s", res.Rejected)
			}
			v := res.Verdicts[0]
			if tc.override == "" && v.Guarantee != tc.want {
				t.Errorf("the compiler calls the route %s, want %s (%q)", v.Guarantee, tc.want, v.Reasons)
			}
			if tc.override != "" && !strings.Contains(strings.Join(v.Reasons, "\n"), tc.want) {
				t.Errorf("the compiler's reasons do not say %s: %q", tc.want, v.Reasons)
			}
			if res.Kills == 0 {
				t.Errorf("no kill landed: %s", summaryLine(res))
			}
			if len(res.Inconclusive) > 0 {
				t.Errorf("inconclusive: %s", summaryLine(res))
			}
			switch {
			case tc.caught && (len(res.Findings) != 1 || !strings.Contains(res.Findings[0].Diff, "- ")):
				t.Errorf("a %s route told %s was not reported with records missing:\n%s", tc.broker, tc.override, report(res))
			case !tc.caught:
				failOn(t, res)
			default:
				t.Logf("caught, as it should be:\n%s", firstLine(report(res), 8))
			}
		})
	}
}
