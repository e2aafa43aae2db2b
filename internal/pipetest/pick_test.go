package pipetest

import (
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// TestPickSink finds the sink a section reads among a fanout's branches:
// by its path or url (an absolute one by the base name it was moved to),
// else the only one of its sort, and says which there are when a section
// names none of them or could mean several.
func TestPickSink(t *testing.T) {
	str := func(s string) plan.Value { return plan.Value{Type: plan.TString, Str: s} }
	file := func(path string) plan.Branch {
		return plan.Branch{Label: plan.BranchTo, Node: plan.Node{Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{"path": str(path)}}}
	}
	sqlite := plan.Branch{Label: plan.BranchTo, Node: plan.Node{Role: plan.RoleSink, Kind: "sql", Attrs: map[string]plan.Value{"url": str("sqlite://t.db")}}}
	route := func(branches ...plan.Branch) plan.Route {
		return plan.Route{Nodes: []plan.Node{
			{Role: plan.RoleSource, Kind: "file"},
			{Role: plan.RoleSink, Kind: "fanout", Children: branches},
		}}
	}
	two := route(file("a.jsonl"), file("b.jsonl"), sqlite)
	cases := []struct {
		name  string
		r     plan.Route
		e     Expect
		found string // the target picked, or
		err   string // what the error says
	}{
		{"by path", two, Expect{Target: "b.jsonl"}, "b.jsonl", ""},
		{"absolute path", two, Expect{Target: "/data/out/b.jsonl"}, "b.jsonl", ""},
		{"by url", two, Expect{Target: "sqlite://t.db", Query: "SELECT 1"}, "sqlite://t.db", ""},
		{"absolute url", two, Expect{Target: "sqlite:///var/db/t.db", Query: "SELECT 1"}, "sqlite://t.db", ""},
		{"database without scheme", two, Expect{Target: "t.db", Query: "SELECT 1"}, "sqlite://t.db", ""},
		{"the only database", two, Expect{Query: "SELECT 1"}, "sqlite://t.db", ""},
		{"the only file", route(file("a.jsonl"), sqlite), Expect{}, "a.jsonl", ""},
		{"one file in two branches", route(file("a.jsonl"), file("a.jsonl")), Expect{}, "a.jsonl", ""},
		{"which file", two, Expect{}, "", "the route writes 3 sinks (a.jsonl, b.jsonl, sqlite://t.db): name the one to read, -- expect sink a.jsonl --"},
		{"no such sink", two, Expect{Target: "c.jsonl"}, "", "the route writes no sink c.jsonl (it writes a.jsonl, b.jsonl, sqlite://t.db)"},
	}
	for _, c := range cases {
		n, err := pickSink(c.r, c.e)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case target(n) != c.found:
			t.Errorf("%s: picked %s, want %s", c.name, target(n), c.found)
		}
	}
}
