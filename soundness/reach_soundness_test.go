//go:build soundness

package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The comparisons of reach.go's shapes catch a false verdict on them, and
// the compiler's verdict on the second-unique shape, which a run showed
// false before the prover learnt it, is at-least-once and loses nothing.
func TestReachShapesCatchPlanted(t *testing.T) {
	t.Run("update moves a second unique column", func(t *testing.T) {
		// a_i takes v_i; b_i wants v_i and is dead-lettered; a_i moves to
		// w_i. A replay that begins at b_i (after a_i's write was
		// committed, b_i's not) finds v_i free and inserts b_i.
		src := `route r {
  batch_size = 1
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to sql {
    url          = "sqlite://out/r.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER, x TEXT UNIQUE)"
    insert_query = """INSERT INTO t (id, qty, x) VALUES (${payload.id}, ${payload.qty}, ${payload.tag}) ON CONFLICT (id) DO UPDATE SET qty = excluded.qty, x = excluded.x"""
  }
}
`
		var in strings.Builder
		seq := 0
		line := func(id, tag string) {
			fmt.Fprintf(&in, `{"id":%q,"seq":%d,"qty":1,"tag":%q}`+"\n", id, seq, tag)
			seq++
		}
		const n = 5000
		for i := range n {
			line(fmt.Sprintf("a%d", i), fmt.Sprintf("v%d", i))
		}
		for i := range n {
			line(fmt.Sprintf("b%d", i), fmt.Sprintf("v%d", i))
			line(fmt.Sprintf("a%d", i), fmt.Sprintf("w%d", i))
		}
		art := Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "t"}
		c := rulesCase("other-unique-truth", 71, src, art)
		c.Input = in.String()
		res := checkUntilKilled(t, c)
		if g := res.Verdicts[0].Guarantee; g != atLeastOnce {
			t.Errorf("the compiler calls an update moving a second unique column %s, want at-least-once", g)
		}
		if len(res.Findings) > 0 {
			t.Errorf("at-least-once, yet:\n%s", report(res))
		}
		c = rulesCase("planted-other-unique", 74, src, art)
		c.Input = in.String()
		c.Routes[0].Override = effectivelyOnce
		wantCaught(t, c, "moves the row's value in the unique index on (x)")
	})
	t.Run("positional handler", func(t *testing.T) {
		// Told the truth, a handler writing positional parts holds every
		// record once, and the sink after it gets the records the handler
		// skips on a replay. Named by write_time, a replay writes the
		// handler's records again, which its parts then show twice.
		src := `route r {
  batch_size = 4
  from file { path = "in.jsonl" }
  handle file { path = "out/r__p1", name_by = NAMING }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to file { path = "out/r__p2", name_by = source_position }
}
`
		arts := []Artifact{
			{Kind: "parts", Path: "out/r__p1", Group: "out/r__p1"},
			{Kind: "parts", Path: "out/r__p2", Group: "out/r__p2"},
		}
		c := rulesCase("positional-handler-truth", 91, strings.Replace(src, "NAMING", "source_position", 1), arts...)
		res := checkUntilKilled(t, c)
		if g := res.Verdicts[0].Guarantee; g != effectivelyOnce {
			t.Errorf("the compiler calls a positional handler before positional parts %s, want effectively-once", g)
		}
		if len(res.Findings) > 0 {
			t.Errorf("effectively-once, yet:\n%s", report(res))
		}
		c = rulesCase("planted-time-handler", 95, strings.Replace(src, "NAMING", "write_time", 1), arts...)
		c.Routes[0].Override = effectivelyOnce
		wantCaught(t, c, "handler file is not idempotent")
	})
	t.Run("id steps", func(t *testing.T) {
		// Seed 2763's route_a: id payload.id, unnest payload.items, a
		// table keyed on meta["mqb.id"]. A record without an id kept no
		// identity, so unnest derived its elements' ids from message_id,
		// new on every read: two clean runs wrote different rows (the
		// harness could only call it timing-dependent) and every replay
		// wrote them again. With the id step's premise such a record is
		// dead-lettered, and the route is checked like any other.
		// Seed 3206's route_b: id message_id, then an id a record without a
		// tag does not render, which kept it the message_id. (The
		// generator now draws an id from the environment between the two;
		// drop is taken out so the route is the one that was found.)
		for _, tc := range []struct {
			seed  uint64
			route int
			shape string
			drop  string
		}{
			{2763, 0, "id payload.id\n  unnest payload.items", ""},
			{3206, 1, "id message_id\n  id \"${payload.id}-${payload.tag}\"", "  id env(\"SOUNDNESS_TENANT\") + \"/\" + string(payload.id)\n"},
		} {
			gen, err := generate(tc.seed, 6)
			if err != nil {
				t.Fatal(err)
			}
			c := &Case{Name: fmt.Sprintf("id-fallback-%d", tc.seed), Seed: tc.seed, Kills: 6, Input: gen.Input, Routes: gen.Routes[tc.route : tc.route+1]}
			if tc.drop != "" {
				c.Routes[0].Source = strings.Replace(c.Routes[0].Source, tc.drop, "", 1)
			}
			c.Source = c.Routes[0].Source
			if !strings.Contains(c.Source, tc.shape) {
				t.Fatalf("seed %d no longer draws the route:\n%s", tc.seed, c.Source)
			}
			res := checkUntilKilled(t, c)
			v := res.Verdicts[0]
			if v.Guarantee != effectivelyOnce {
				t.Errorf("seed %d: the compiler calls the route %s, want effectively-once", tc.seed, v.Guarantee)
			}
			if len(res.Findings) > 0 || len(res.Inconclusive) > 0 {
				t.Errorf("seed %d: findings %d, inconclusive %v:\n%s", tc.seed, len(res.Findings), res.Inconclusive, report(res))
			}
		}
	})
	t.Run("stable switch", func(t *testing.T) {
		// Every branch but one absorbs a repeat; the us branch inserts
		// without a key, so a replayed us record is a second row.
		src := `route r {
  batch_size = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to switch {
    on = payload.region
    case "eu" {
      to sql {
        url          = "sqlite://out/r.db"
        create_table = "CREATE TABLE IF NOT EXISTS eu (id TEXT PRIMARY KEY, qty INTEGER)"
        insert_query = """INSERT INTO eu (id, qty) VALUES (${let k = string(payload.id); k + "-r"}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"""
      }
    }
    case "us" {
      to sql {
        url          = "sqlite://out/r.db"
        create_table = "CREATE TABLE IF NOT EXISTS us (rid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, qty INTEGER)"
        insert_query = """INSERT INTO us (id, qty) VALUES (${join(sort(keys(payload)), ",") + "/" + string(payload.id)}, ${payload.qty})"""
      }
    }
    default { to file { path = "out/r__p1", name_by = source_position } }
  }
}
`
		arts := []Artifact{
			{Kind: "table", Path: "out/r.db", Table: "eu", Group: "eu"},
			{Kind: "table", Path: "out/r.db", Table: "us", Group: "us", Volatile: []string{"rid"}},
			{Kind: "parts", Path: "out/r__p1", Group: "out/r__p1"},
		}
		c := rulesCase("planted-stable-switch", 81, src, arts...)
		c.Routes[0].Override = effectivelyOnce
		res := wantCaught(t, c, "plain INSERT")
		if res != nil && !slices.ContainsFunc(res.Verdicts[0].Reasons, func(r string) bool { return strings.HasPrefix(r, "switch case \"eu\": write:") }) {
			t.Errorf("the eu branch is not proven by its own write: %q", res.Verdicts[0].Reasons)
		}
	})
}
