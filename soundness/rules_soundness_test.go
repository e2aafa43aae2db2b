//go:build soundness

package main

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// rulesCase is a one-route case over the file, its input drawn from seed,
// with the route's artifacts (a dlq artifact is added when the route has a
// dead-letter file).
func rulesCase(name string, seed uint64, src string, arts ...Artifact) *Case {
	c := &Case{Name: name, Seed: seed, Kills: 6, Source: src}
	c.Input = genData(rand.New(rand.NewPCG(seed, seed)), 10000)
	if strings.Contains(src, ".dlq.jsonl") {
		arts = append(arts, Artifact{Kind: "dlq", Path: "out/r.dlq.jsonl", Group: "r/dlq"})
	}
	c.Routes = []RouteShape{{Name: "r", Source: src, Artifacts: arts}}
	return c
}

// checkUntilKilled checks c, again with the next seeds until a kill lands
// (on a quiet machine a run can end before the first).
func checkUntilKilled(t *testing.T, c *Case) *Result {
	t.Helper()
	var res *Result
	for try := range 3 {
		c.Seed += uint64(try)
		r, err := checker.Check(c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rejected != "" {
			t.Fatalf("rejected by mqbc build: %s", r.Rejected)
		}
		if res = r; res.Kills > 0 {
			return res
		}
	}
	t.Fatalf("no kill landed: %s", summaryLine(res))
	return nil
}

// The comparisons of rules.go's shapes catch a false verdict: each shape,
// told effectively-once when a replay really does write again, is
// reported with the extra rows; the compiler's own verdict is checked on
// the way (it must not be effectively-once).
func TestRuleShapesCatchPlanted(t *testing.T) {
	t.Run("conflict target not written", func(t *testing.T) {
		// x is UNIQUE but never written: NULL never conflicts, so a
		// replayed record is a second row.
		src := `route r {
  batch_size = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to sql {
    url          = "sqlite://out/r.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (rid INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT, qty INTEGER, x TEXT UNIQUE)"
    insert_query = """INSERT INTO t (id, qty) VALUES (${payload.id}, ${payload.qty}) ON CONFLICT (x) DO NOTHING"""
  }
}
`
		c := rulesCase("planted-target", 31, src, Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "t", Volatile: []string{"rid"}})
		c.Routes[0].Override = effectivelyOnce
		wantCaught(t, c, "not in the insert's column list")
	})
	t.Run("keyed dlq", func(t *testing.T) {
		// Records without an id are dead-lettered into a table without a
		// key: a replay dead-letters them again, as a second row.
		src := `route r {
  batch_size = 2
  from file { path = "in.jsonl" }
  dlq {
    to sql {
      url          = "sqlite://out/r.dlq.db"
      create_table = "CREATE TABLE IF NOT EXISTS dlq (rid INTEGER PRIMARY KEY AUTOINCREMENT, k TEXT, err TEXT)"
      insert_query = """INSERT INTO dlq (k, err) VALUES (${meta["mqb.src.line"]}, ${meta["mqb.error"]})"""
    }
  }
  to sql {
    url          = "sqlite://out/r.db"
    create_table = "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty INTEGER)"
    insert_query = """INSERT INTO t (id, qty) VALUES (${payload.id}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"""
  }
}
`
		c := rulesCase("planted-dlq", 41, src,
			Artifact{Kind: "table", Path: "out/r.dlq.db", Table: "dlq", Group: "r/dlq", Volatile: []string{"rid", "err"}, KeyedDLQ: true},
			Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "t"})
		c.Routes[0].OverrideDLQ = true
		if res := wantCaught(t, c, ""); res != nil && res.Verdicts[0].Guarantee != effectivelyOnce {
			t.Errorf("the route is %s, want effectively-once (its dlq is what is planted)", res.Verdicts[0].Guarantee)
		}
	})
	t.Run("union switch", func(t *testing.T) {
		// A switch on the outcome of the record's own call: a record the
		// call inserted before a kill finds it there on the replay and
		// takes the other branch, so it can land in both tables, which
		// the union of their keys shows twice. (A switch on now() would
		// do the same, but two clean runs of it differ already.)
		src := `route r {
  batch_size = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/r.dlq.jsonl" } }
  to request {
    call sql {
      url            = "sqlite://out/r.db"
      create_table   = "CREATE TABLE IF NOT EXISTS calls (id TEXT PRIMARY KEY)"
      insert_query   = """INSERT INTO calls (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING"""
      report_outcome = true
    }
    forward switch {
      on = meta["sql.outcome"]
      case "inserted" {
        to sql {
          url          = "sqlite://out/r.db"
          create_table = "CREATE TABLE IF NOT EXISTS t1 (id TEXT PRIMARY KEY, qty INTEGER)"
          insert_query = """INSERT INTO t1 (id, qty) VALUES (${payload.id}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"""
        }
      }
      default {
        to sql {
          url          = "sqlite://out/r.db"
          create_table = "CREATE TABLE IF NOT EXISTS t2 (id TEXT PRIMARY KEY, qty INTEGER)"
          insert_query = """INSERT INTO t2 (id, qty) VALUES (${payload.id}, ${payload.qty}) ON CONFLICT (id) DO NOTHING"""
        }
      }
    }
  }
}
`
		arts := []Artifact{
			{Kind: "table", Path: "out/r.db", Table: "t1", Group: "r/union1", KeyOnly: "id"},
			{Kind: "table", Path: "out/r.db", Table: "t2", Group: "r/union1", KeyOnly: "id"},
		}
		// Told the truth (at-least-once), the union holds every key,
		// whichever branch each record took on which run.
		c := rulesCase("union-truth", 51, src, arts...)
		res := checkUntilKilled(t, c)
		if g := res.Verdicts[0].Guarantee; g != atLeastOnce {
			t.Errorf("the compiler calls a switch on a call's outcome %s, want at-least-once", g)
		}
		if len(res.Findings) > 0 || slices.Contains(res.Inconclusive, "r") {
			t.Errorf("a record that changed branches counts as lost (findings %d, inconclusive %v):\n%s", len(res.Findings), res.Inconclusive, report(res))
		}
		c = rulesCase("planted-union", 51, src, arts...)
		c.Routes[0].Override = effectivelyOnce
		wantCaught(t, c, "")
	})
}

// wantCaught checks c, whose verdict is planted, and demands that it was
// reported with extra rows, and that the compiler's own verdict, when
// reason is set, gave that reason and was not effectively-once. A kill
// may land where nothing is replayed: the check is made again, with the
// next seeds' kill instants, three times at most.
func wantCaught(t *testing.T, c *Case, reason string) *Result {
	t.Helper()
	var res *Result
	// Where a kill lands is timing: a quiet or a loaded machine can land
	// every kill of a seed where nothing is written twice.
	for try := range 6 {
		if try > 0 {
			t.Logf("not caught with seed %d's kills (%s): again", c.Seed, summaryLine(res))
			c.Seed++
		}
		res = checkUntilKilled(t, c)
		if len(res.Findings) == 1 && strings.Contains(res.Findings[0].Diff, "+ ") {
			break
		}
	}
	if reason != "" {
		v := res.Verdicts[0]
		if !slices.ContainsFunc(v.Reasons, func(r string) bool { return strings.Contains(r, reason) }) ||
			!slices.ContainsFunc(v.Reasons, func(r string) bool { return strings.HasPrefix(r, "not effectively-once: ") }) {
			t.Errorf("the compiler does not demote the route with %q: %q", reason, v.Reasons)
		}
	}
	if len(res.Findings) != 1 || !strings.Contains(res.Findings[0].Diff, "+ ") {
		t.Errorf("the planted verdict was not reported with extra rows (%s):\n%s", summaryLine(res), report(res))
		return res
	}
	t.Logf("caught, as it should be:\n%s", firstLine(report(res), 8))
	return res
}
