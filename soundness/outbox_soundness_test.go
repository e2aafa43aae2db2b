//go:build soundness

package main

import (
	"strings"
	"testing"
)

// A sink on the sql source's own database reads back from it: told the
// truth, the transactional outbox (concurrency 1) holds every row of a
// plain INSERT once under kills, and the same route at concurrency 2,
// where the outbox is off and the verdict at-least-once, planted as
// exactly-once is reported with the rows a replay wrote twice.
func TestOutboxCatchesPlanted(t *testing.T) {
	src := `route r {
  batch_size = 4
  CONC
  from sql { url = "${env(\"SOUNDNESS_PG_URL\")}", table = "src", cursor_column = "n", poll_interval = 100ms }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to sql {
    url          = "${env(\"SOUNDNESS_PG_URL\")}"
    create_table = "CREATE TABLE IF NOT EXISTS r_o1 (rid BIGSERIAL PRIMARY KEY, id TEXT, qty BIGINT, body TEXT)"
    insert_query = """INSERT INTO r_o1 (id, qty, body) VALUES (${payload.id}, ${payload.qty}, ${payload.body})"""
  }
}
`
	art := Artifact{Kind: "table", Path: pgSourcePlaceholder, Table: "r_o1", Group: "r_o1", Volatile: []string{"rid"}}
	mk := func(name string, seed uint64, conc string) *Case {
		c := rulesCase(name, seed, strings.Replace(src, "CONC", conc, 1), art)
		c.Broker = brokerSQL
		c.Input = c.Input[:len(c.Input)/4]
		c.Routes[0].Artifacts[1].ByContent = true
		return c
	}
	res := checkUntilKilled(t, mk("outbox-truth", 31, ""))
	if g := res.Verdicts[0].Guarantee; g != exactlyOnce {
		t.Errorf("the compiler calls a plain INSERT on the source's database %s, want exactly-once", g)
	}
	if len(res.Findings) > 0 {
		t.Errorf("exactly-once through the outbox, yet:\n%s", report(res))
	}
	c := mk("planted-outbox", 41, "concurrency = 2")
	c.Routes[0].Override = exactlyOnce
	wantCaught(t, c, "")
}
