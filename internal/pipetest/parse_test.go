package pipetest

import (
	"strings"
	"testing"
)

// TestParse reads the header and sections of a .mqbtest file and refuses
// what it cannot run, naming why.
func TestParse(t *testing.T) {
	cases := []struct {
		name, src, err string
		expects        int
	}{
		{"full", "About.\npipeline: p.mqb\nroute: r\n-- input --\n{}\n-- expect sink: SELECT a FROM t --\n{}\n-- expect dlq --\n-- expect verdict --\nat-least-once\n", "", 3},
		{"no pipeline", "-- input --\n{}\n-- expect dlq --\n", "no `pipeline: FILE.mqb` line", 0},
		{"no input", "pipeline: p.mqb\n-- expect dlq --\n", "no -- input -- section", 0},
		{"nothing expected", "pipeline: p.mqb\n-- input --\n{}\n", "nothing is expected", 0},
		{"unknown section", "pipeline: p.mqb\n-- input --\n-- expect sinks --\n", `unknown section "expect sinks"`, 0},
		{"not a select", "pipeline: p.mqb\n-- input --\n-- expect sink: DELETE FROM t --\n", "after `expect sink:` comes a SELECT", 0},
		{"two inputs", "pipeline: p.mqb\n-- input --\n-- input --\n", "two input sections", 0},
	}
	for _, c := range cases {
		got, err := Parse("dir/x.mqbtest", []byte(c.src))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.err)
		case c.err == "":
			if got.Pipeline != "dir/p.mqb" || got.Route != "r" || len(got.Expects) != c.expects || got.Expects[0].Query != "SELECT a FROM t" {
				t.Errorf("%s: parsed %+v", c.name, got)
			}
		}
	}
}

// TestDiff shows lines only wanted with -, lines only got with +.
func TestDiff(t *testing.T) {
	got := diff([]string{"a", "b", "c"}, []string{"a", "x", "c", "d"})
	want := "      a\n    - b\n    + x\n      c\n    + d\n"
	if got != want {
		t.Errorf("diff:\n%swant:\n%s", got, want)
	}
}

// TestParseSinkTarget reads which sink an expect sink section names: a
// path, a url (whose "://" is no separator), with or without a query.
func TestParseSinkTarget(t *testing.T) {
	cases := []struct {
		section, target, query, err string
	}{
		{"expect sink", "", "", ""},
		{"expect sink out/new", "out/new", "", ""},
		{"expect sink: SELECT a FROM t", "", "SELECT a FROM t", ""},
		{"expect sink sqlite://x.db: SELECT a FROM t", "sqlite://x.db", "SELECT a FROM t", ""},
		{"expect sink x.db:select a from t", "x.db", "select a from t", ""},
		{"expect sink sqlite://x.db: DELETE FROM t", "", "", "after `expect sink:` comes a SELECT"},
		{"expect sink out/new:", "", "", "after `expect sink:` comes a SELECT"},
	}
	for _, c := range cases {
		got, err := Parse("x.mqbtest", []byte("pipeline: p.mqb\n-- input --\n{}\n-- "+c.section+" --\n{}\n"))
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one saying %q", c.section, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.section, err)
		case got.Expects[0].Target != c.target || got.Expects[0].Query != c.query:
			t.Errorf("%s: target %q query %q, want %q and %q", c.section, got.Expects[0].Target, got.Expects[0].Query, c.target, c.query)
		}
	}
}
