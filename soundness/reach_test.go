package main

import (
	"regexp"
	"strings"
	"testing"
)

// Drawing the shapes of reach.go changed no other seed: a seed whose file
// differs from what it was without them writes one of them, and CI's
// fixed seeds (1 to 10) are as they were.
func TestReachShapesLeaveOtherSeeds(t *testing.T) {
	changed := 0
	seen := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		reachShapes = false
		before, err := generate(seed, 3)
		reachShapes = true
		if err != nil {
			t.Fatal(err)
		}
		if c.Source == before.Source && c.Input == before.Input {
			continue
		}
		changed++
		if seed <= 10 {
			t.Errorf("CI seed %d changed", seed)
		}
		marks := map[string]string{"stable switch": "on = payload.region", "second unique": "qty INTEGER, x TEXT UNIQUE)", "order-blind key": "sort(keys(payload))"}
		hit := false
		for name, m := range marks {
			if strings.Contains(c.Source, m) {
				seen[name]++
				hit = true
			}
		}
		for _, l := range strings.Split(c.Source, "\n") {
			if strings.Contains(l, "handle file") && strings.Contains(l, "name_by") {
				seen["positional handler"]++
				hit = true
			}
		}
		for _, k := range reachKeys {
			hit = hit || strings.Contains(c.Source, "(id, qty, body) VALUES ("+k)
		}
		if c.Input != before.Input || !hit {
			t.Errorf("seed %d changed without drawing a shape of reach.go:\n%s\nwas:\n%s", seed, c.Source, before.Source)
		}
	}
	if changed == 0 || changed > 120 {
		t.Errorf("%d of 300 seeds draw a shape of reach.go", changed)
	}
	t.Logf("%d of 300 seeds draw a shape of reach.go: %v", changed, seen)
}

// The generator declares the second unique column of the tables it gives
// one (x of otherUniqueLeaf), with the conflict target's column and the
// payload field bound to it, and declares it on no other table: the
// checker explains a dead-lettered record by it (explainDLQ).
func TestOtherUniqueDeclared(t *testing.T) {
	ddl := regexp.MustCompile(`CREATE TABLE IF NOT EXISTS (t\d+) \(id TEXT PRIMARY KEY, qty INTEGER, x TEXT UNIQUE\)`)
	declared := 0
	for seed := uint64(11); seed <= 1500; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Routes {
			tables := map[string]bool{}
			for _, m := range ddl.FindAllStringSubmatch(r.Source, -1) {
				if strings.Contains(r.Source, "INSERT INTO "+m[1]+" (id, qty, x) VALUES (${payload.id}, ${payload.qty}, ${payload.tag}) ON CONFLICT (id) DO UPDATE SET ") {
					tables[m[1]] = true
				}
			}
			for _, a := range r.Artifacts {
				switch {
				case a.Kind == "table" && tables[a.Table]:
					if a.OtherUnique == nil || *a.OtherUnique != (OtherUnique{Column: "x", Key: "id", KeyField: "id"}) {
						t.Errorf("seed %d, %s: table %s has a second unique x, declared %+v", seed, r.Name, a.Table, a.OtherUnique)
					}
					declared++
				case a.OtherUnique != nil:
					t.Errorf("seed %d, %s: %s %s declares a second unique column it does not have: %+v", seed, r.Name, a.Kind, a.Table, *a.OtherUnique)
				}
			}
		}
	}
	if declared == 0 {
		t.Error("no seed of 11 to 1500 draws a table with a second unique column")
	}
	t.Logf("%d tables with a second unique column in seeds 11 to 1500", declared)

	mongoSinks = true
	defer func() { mongoSinks = false }()
	c, err := generate(26067, 5)
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Routes[0].Artifacts[1]; a.Table != "t2" || a.OtherUnique == nil {
		t.Errorf("seed 26067's route_a table: %+v", a)
	}
}
