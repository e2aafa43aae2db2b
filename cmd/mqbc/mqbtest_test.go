package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite cmd/mqbc's golden files")

// TestMqbtestExamples runs every examples/**/*.mqbtest through the binary:
// each must pass.
func TestMqbtestExamples(t *testing.T) {
	var files []string
	filepath.WalkDir(filepath.Join("..", "..", "examples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".mqbtest" {
			files = append(files, p)
		}
		return err
	})
	if len(files) == 0 {
		t.Fatal("no examples/**/*.mqbtest")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			r := runIn(t, ".", "test", f)
			if r.code != exitOK {
				t.Errorf("mqbc test %s: exit %d\n%s%s", f, r.code, r.stdout, r.stderr)
			}
		})
	}
}

var durationRE = regexp.MustCompile(`\(\d+\.\d\ds\)`)

// TestMqbtestOutcomes runs the cases of testdata/mqbtest: a passing test
// exits 0 with PASS; a failing one exits 1 and shows its diff (golden
// fail.golden); a route into a broker cannot be tested in-process and
// says so; a route from a broker runs on the test's input; a route into a
// switch inside a fanout is checked sink by sink, and a section that
// names no sink of the route, or not which of several, says so
// (branches_fail.golden); a directory runs every test under it.
func TestMqbtestOutcomes(t *testing.T) {
	dir := filepath.Join("testdata", "mqbtest")
	cases := []struct {
		args   []string
		code   int
		golden string
	}{
		{[]string{"pass.mqbtest"}, exitOK, "pass.golden"},
		{[]string{"fail.mqbtest"}, exitError, "fail.golden"},
		{[]string{"kafka.mqbtest"}, exitError, "kafka.golden"},
		{[]string{"branches.mqbtest", "kafka_source.mqbtest"}, exitOK, ""},
		{[]string{"branches_fail.mqbtest"}, exitError, "branches_fail.golden"},
		{[]string{"."}, exitError, "dir.golden"},
		{[]string{}, exitUsage, ""},
	}
	for _, c := range cases {
		r := runIn(t, dir, append([]string{"test"}, c.args...)...)
		if r.code != c.code {
			t.Errorf("mqbc test %v: exit %d, want %d\n%s%s", c.args, r.code, c.code, r.stdout, r.stderr)
		}
		if c.golden == "" {
			continue
		}
		got := durationRE.ReplaceAllString(r.stdout, "(…s)")
		path := filepath.Join(dir, c.golden)
		if *updateGolden {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./cmd/mqbc -run TestMqbtest -update)", err)
		}
		if got != string(want) {
			t.Errorf("mqbc test %v:\n--- got ---\n%s--- want (%s) ---\n%s", c.args, got, path, want)
		}
	}
}
