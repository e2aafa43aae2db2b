//go:build soundness

package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Generated routes whose sql sinks are on PostgreSQL and MariaDB (the
// dialects' own conflict forms: ON CONFLICT … EXCLUDED, ON CONSTRAINT,
// INSERT IGNORE, ON DUPLICATE KEY UPDATE … VALUES(), REPLACE), run cleanly
// and under SIGKILLs. CI checks the first two seeds from
// SOUNDNESS_SOURCE_SEED (or the clock's) on that draw a server sink;
// SOUNDNESS_SERVER_SEEDS checks more.
func TestServerSinks(t *testing.T) {
	serverSinks = true
	defer func() { serverSinks = false }()
	_, seed := sampledKinds(t)
	want := envInt("SOUNDNESS_SERVER_SEEDS", 2)
	kills := envInt("SOUNDNESS_KILLS", 3)
	t.Logf("seeds from %d (rerun with SOUNDNESS_SOURCE_SEED=%d)", seed%100000+11, seed)
	found := 0
	for s := seed%100000 + 11; found < want; s++ {
		c, err := generate(s, kills)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Source, pgPlaceholder) && !strings.Contains(c.Source, mariaPlaceholder) {
			continue
		}
		found++
		t.Run(c.Name, func(t *testing.T) {
			checkGenerated(t, c)
		})
	}
}

// The harness reads the servers' tables: a route keyed on now() (a new row
// on every delivery) told effectively-once must be reported with extra
// rows once a kill made the file source deliver a record again. A kill
// only lands while the run still works, and each landed kill leaves the
// next runs less to do, so a seed may land one kill late, with nothing
// left to replay: such a seed proves nothing either way and the next is
// tried; a seed with two kills landed and no report fails the test.
func TestServerSinksCatchPlanted(t *testing.T) {
	for _, tc := range []struct{ name, url, ddl, conflict string }{
		{"postgres", pgPlaceholder, "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, qty BIGINT)", "ON CONFLICT (id) DO NOTHING"},
		{"mariadb", mariaPlaceholder, "CREATE TABLE IF NOT EXISTS t (id VARCHAR(191) PRIMARY KEY, qty BIGINT)", "ON DUPLICATE KEY UPDATE id = id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(7); seed < 12; seed++ {
				res := checkPlanted(t, tc.name, tc.url, tc.ddl, tc.conflict, seed)
				caught := len(res.Findings) == 1 && strings.Contains(res.Findings[0].Diff, "+ ")
				switch {
				case caught:
					t.Logf("caught, as it should be:\n%s", firstLine(report(res), 8))
					return
				case res.Kills >= 2 || len(res.Findings) > 0:
					t.Fatalf("a now()-keyed route on %s told effectively-once was not reported with extra rows:\n%s", tc.name, report(res))
				}
				t.Logf("seed %d: %d kills landed, nothing replayed; trying the next seed\n%s", seed, res.Kills, report(res))
			}
			t.Fatalf("no seed of 7..11 landed two kills on the planted route over %s", tc.name)
		})
	}
}

// checkPlanted runs the planted now()-keyed route over one server with seed.
func checkPlanted(t *testing.T, name, url, ddl, conflict string, seed uint64) *Result {
	t.Helper()
	c := &Case{Name: "planted-" + name, Seed: seed, Kills: 4}
	// A clean run of 3,000 records takes 70 ms on PostgreSQL, too short
	// for kills seeded within the first 350 ms to land; 20,000 take long
	// enough.
	c.Input = genData(rand.New(rand.NewPCG(seed, 7)), 20000)
	c.Source = fmt.Sprintf(`route planted {
  batch_size = 2
  from file { path = "in.jsonl" }
  dlq { to file { path = "out/planted.dlq.jsonl" } }
  to sql {
    url          = %q
    create_table = %q
    insert_query = """INSERT INTO t (id, qty) VALUES (${string(now().UnixNano())}, ${payload.qty}) %s"""
  }
}
`, url, ddl, conflict)
	c.Routes = []RouteShape{{Name: "planted", Source: c.Source, Override: effectivelyOnce, Artifacts: []Artifact{
		{Kind: "dlq", Path: "out/planted.dlq.jsonl", Group: "planted/dlq"},
		{Kind: "table", Path: url, Table: "t", Group: "t", Volatile: []string{"id"}},
	}}}
	res, err := checker.Check(c)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkGenerated checks a generated case and fails t on a false verdict;
// a case mqbc build refuses is logged and gives nil (it cannot be falsely
// promised).
func checkGenerated(t *testing.T, c *Case) *Result {
	t.Helper()
	res, err := checker.Check(c)
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	if res.Rejected != "" {
		t.Logf("rejected by mqbc build: %s", firstLine(res.Rejected, 3))
		return nil
	}
	failOn(t, res)
	return res
}
