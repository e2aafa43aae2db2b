package main

import (
	"fmt"
	"strings"
	"testing"
)

// snap makes a snapshot of one group whose Kept rows are rows (and Full
// rows the same).
func snap(group string, rows ...string) Snapshot {
	s := newSnapshot()
	s.Full[group], s.Kept[group] = Multiset{}, Multiset{}
	for _, r := range rows {
		s.add(group, r, r)
	}
	return s
}

func ids(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("id=%q", fmt.Sprintf("%s%d", prefix, i)))
	}
	return out
}

// What timing cannot change holds the killed run to what both clean runs
// agree on, and to nothing the shapes of a group let timing move.
func TestInvariants(t *testing.T) {
	// A keyed table, as the generator describes one keyed on a stable
	// value: every column but id mutable.
	keyedTable := Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "g", Mutable: []string{"qty", "body"}}
	route := func(arts ...Artifact) RouteShape { return RouteShape{Name: "r", Artifacts: arts} }
	stable := ids("k", 10)
	tests := []struct {
		name   string
		r      RouteShape
		exact  bool
		c1, c2 []string
		killed []string
		want   string // "" when nothing is broken
	}{
		{
			// The four false verdicts of the last hunt: a key bound to an
			// identity that is per-delivery for some records (here 3 of
			// 10): both clean runs hold 10 rows, with other keys for those
			// 3; a replay wrote 2 of them again.
			name:   "per-delivery identity replayed under effectively-once",
			r:      route(keyedTable),
			exact:  true,
			c1:     append(ids("k", 7), ids("a", 3)...),
			c2:     append(ids("k", 7), ids("b", 3)...),
			killed: append(append(ids("k", 7), ids("c", 3)...), ids("d", 2)...),
			want:   "2 too many (a duplicate)",
		},
		{
			name:   "the same without a replay",
			r:      route(keyedTable),
			exact:  true,
			c1:     append(ids("k", 7), ids("a", 3)...),
			c2:     append(ids("k", 7), ids("b", 3)...),
			killed: append(ids("k", 7), ids("c", 3)...),
		},
		{
			name:   "a key both clean runs hold is missing",
			r:      route(keyedTable),
			c1:     append(ids("k", 7), ids("a", 3)...),
			c2:     append(ids("k", 7), ids("b", 3)...),
			killed: append(ids("k", 6), ids("c", 4)...),
			want:   `- id="k6"`,
		},
		{
			name:   "under at-least-once a duplicate is allowed",
			r:      route(keyedTable),
			c1:     append(ids("k", 7), ids("a", 3)...),
			c2:     append(ids("k", 7), ids("b", 3)...),
			killed: append(append(ids("k", 7), ids("c", 3)...), ids("d", 2)...),
		},
		{
			name:   "under at-least-once fewer records than both clean runs hold is a loss",
			r:      route(Artifact{Kind: "lines", Path: "out/w.jsonl", Group: "g"}),
			c1:     []string{"a", "b", "b", "c"},
			c2:     []string{"a", "b", "c", "c"},
			killed: []string{"a", "b", "c"},
			want:   "1 missing (a loss)",
		},
		{
			name:   "a key neither clean run holds when they hold the same keys",
			r:      route(Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "g", KeyOnly: "id"}),
			exact:  true,
			c1:     stable,
			c2:     stable,
			killed: append(ids("k", 9), `id="zz"`),
			want:   `+ id="zz"`,
		},
		{
			// The branches of a switch on a per-delivery value are two
			// keyed tables in one group: a key's records split between
			// them or not, so the row count moves with timing (here 12,
			// 11 and 10), the keys do not.
			name: "per-delivery switch over keyed tables: count not fixed",
			r: route(keyedTable, Artifact{Kind: "table", Path: "out/r.db", Table: "t2", Group: "g",
				Mutable: []string{"qty", "body"}}),
			exact:  true,
			c1:     append(ids("k", 10), ids("k", 2)...),
			c2:     append(ids("k", 10), ids("k", 1)...),
			killed: ids("k", 10),
		},
		{
			name: "per-delivery switch over keyed tables: a key lost",
			r: route(keyedTable, Artifact{Kind: "table", Path: "out/r.db", Table: "t2", Group: "g",
				Mutable: []string{"qty", "body"}}),
			exact:  true,
			c1:     append(ids("k", 10), ids("k", 2)...),
			c2:     append(ids("k", 10), ids("k", 1)...),
			killed: ids("k", 9),
			want:   `- id="k9"`,
		},
		{
			// A switch on a request's outcome: a replayed record may leave
			// the group for another branch.
			name:   "under a switch on the outcome nothing is fixed",
			r:      route(Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "g", Mutable: []string{"qty"}, AnyBranch: true}),
			exact:  true,
			c1:     stable,
			c2:     stable,
			killed: ids("k", 5),
		},
		{
			// An unkeyed table (its row id volatile) is not read by key:
			// its rows are deliveries; its count still is fixed.
			name:   "unkeyed table: rows are not keys",
			r:      route(Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "g", Volatile: []string{"rid"}, Mutable: []string{"qty"}}),
			exact:  true,
			c1:     []string{"rid=* id=1", "rid=* id=2"},
			c2:     []string{"rid=* id=1", "rid=* id=3"},
			killed: []string{"rid=* id=4", "rid=* id=5"},
		},
		{
			name:   "unkeyed table: a duplicate",
			r:      route(Artifact{Kind: "table", Path: "out/r.db", Table: "t", Group: "g", Volatile: []string{"rid"}}),
			exact:  true,
			c1:     []string{"rid=* id=1", "rid=* id=2"},
			c2:     []string{"rid=* id=1", "rid=* id=3"},
			killed: []string{"rid=* id=1", "rid=* id=2", "rid=* id=2"},
			want:   "1 too many",
		},
		{
			// A dead-letter file is written at least once by design: more
			// lines are allowed, a lost unparsable line is not.
			name:   "dead-letter file: repeats allowed",
			r:      route(Artifact{Kind: "dlq", Path: "out/r.dlq.jsonl", Group: "r/dlq"}),
			exact:  true,
			c1:     []string{"position 3" + unparsable, "position 5"},
			c2:     []string{"position 3" + unparsable, "position 6"},
			killed: []string{"position 3" + unparsable, "position 3" + unparsable, "position 5", "position 7"},
		},
		{
			name:   "dead-letter file: an unparsable line lost",
			r:      route(Artifact{Kind: "dlq", Path: "out/r.dlq.jsonl", Group: "r/dlq"}),
			c1:     []string{"position 3" + unparsable, "position 5"},
			c2:     []string{"position 3" + unparsable, "position 6"},
			killed: []string{"position 5"},
			want:   "position 3" + unparsable,
		},
		{
			name:   "the clean runs disagree on the count: not checked",
			r:      route(Artifact{Kind: "lines", Path: "out/w.jsonl", Group: "g"}),
			exact:  true,
			c1:     []string{"a", "b"},
			c2:     []string{"a", "b", "b"},
			killed: []string{"a", "b", "b", "b"},
		},
		{
			name:   "a Timed route decides by the clock: nothing is fixed",
			r:      RouteShape{Name: "r", Timed: true, Artifacts: []Artifact{keyedTable}},
			exact:  true,
			c1:     stable,
			c2:     stable,
			killed: append(ids("k", 9), ids("z", 5)...),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.r.Artifacts[0].Group
			got := invariants(tc.r, usedBy([]RouteShape{tc.r}), tc.exact, false, snap(g, tc.c1...), snap(g, tc.c2...), snap(g, tc.killed...))
			switch {
			case tc.want == "" && got != "":
				t.Errorf("reported, but timing could explain it:\n%s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("want a report containing %q, got:\n%s", tc.want, got)
			}
		})
	}
}

// A part directory two routes write counts the other route's records too:
// no count of it is fixed.
func TestInvariantsSharedArtifact(t *testing.T) {
	a := Artifact{Kind: "parts", Path: "out/route_a__p1", Group: "out/route_a__p1"}
	ra := RouteShape{Name: "route_a", Artifacts: []Artifact{a}}
	rb := RouteShape{Name: "route_b", Artifacts: []Artifact{a}, Timed: true}
	got := invariants(ra, usedBy([]RouteShape{ra, rb}), true, false,
		snap(a.Group, "x", "y"), snap(a.Group, "x", "z"), snap(a.Group, "x", "y", "z"))
	if got != "" {
		t.Errorf("reported on a shared part directory:\n%s", got)
	}
}

// An unexplained route says what kind of difference its clean runs show.
func TestCleanHints(t *testing.T) {
	keyed := RouteShape{Name: "r", Artifacts: []Artifact{{Kind: "table", Path: "out/r.db", Table: "t", Group: "g", Mutable: []string{"qty"}}}}
	c1, c2 := snap("g", append(ids("k", 5), ids("a", 2)...)...), snap("g", append(ids("k", 5), ids("b", 2)...)...)
	if h := cleanHints(keyed, usedBy([]RouteShape{keyed}), c1, c2); !strings.Contains(h, "keys differ (2 only in the first clean run, 2 only in the second)") {
		t.Errorf("per-delivery keys: %q", h)
	}
	// The same keys; a column a conflict rewrites differs (Full only).
	c1, c2 = newSnapshot(), newSnapshot()
	c1.add("g", `id="k" qty=1`, `id="k"`)
	c2.add("g", `id="k" qty=2`, `id="k"`)
	if h := cleanHints(keyed, usedBy([]RouteShape{keyed}), c1, c2); !strings.Contains(h, "which record of a key won depends on order") {
		t.Errorf("order-dependent rows: %q", h)
	}
	lines := RouteShape{Name: "r", Artifacts: []Artifact{{Kind: "lines", Path: "out/w.jsonl", Group: "g"}}}
	if h := cleanHints(lines, usedBy([]RouteShape{lines}), snap("g", "a", "b"), snap("g", "a")); !strings.Contains(h, "2 records against 1") {
		t.Errorf("counts: %q", h)
	}
}
