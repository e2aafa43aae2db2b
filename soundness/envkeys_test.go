package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
)

var envMarks = map[string]*regexp.Regexp{
	"id step":        regexp.MustCompile(`\n\s*id [^\n]*env\("`),
	"dedup key":      regexp.MustCompile(`\n\s*key\s*= [^\n]*env\("`),
	"sql key":        regexp.MustCompile(`VALUES \(\$\{[^}]*env\("`),
	"unset variable": regexp.MustCompile(`env\("SOUNDNESS_TENANT"\)`),
	"set variable":   regexp.MustCompile(`env\("HOME"\)`),
	"conditional":    regexp.MustCompile(`env\("[A-Z_]+"\) == "" \?`),
}

// The generator writes id steps, dedup keys and sql conflict keys that
// read env(); the compiler builds them (W021 on a write key: stable within
// one process), and a route keyed on one can be effectively-once, which
// the harness, running every process with one environment, then checks.
func TestEnvKeysDrawn(t *testing.T) {
	seen := map[string]int{}
	proven, warned := 0, 0
	for seed := uint64(11); seed <= 410; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Source, `env("HOME")`) && !strings.Contains(c.Source, `env("SOUNDNESS_TENANT")`) {
			continue
		}
		if !c.ruleDrawn {
			t.Errorf("seed %d draws an env key but is not checked under -rules", seed)
		}
		for name, re := range envMarks {
			if re.MatchString(c.Source) {
				seen[name]++
			}
		}
		p, diags := compiler.CompileSources([]compiler.Source{{Name: "routes.mqb", Src: []byte(c.Source)}})
		for _, d := range diags {
			if d.Code == "W021" {
				warned++
			}
		}
		if diags.HasErrors() {
			for _, d := range diags {
				if d.Severity == diag.Error && strings.Contains(fmt.Sprint(d), "env(") {
					t.Errorf("seed %d: refused for its env key: %v\n%s", seed, d, c.Source)
				}
			}
			continue
		}
		for i, r := range p.Routes {
			if envMarks["sql key"].MatchString(c.Routes[i].Source) && r.Guarantee == plan.EffectivelyOnce {
				proven++
			}
		}
	}
	for name := range envMarks {
		if seen[name] == 0 {
			t.Errorf("no file over seeds 11-410 has an env key as %s", name)
		}
	}
	if proven == 0 || warned == 0 {
		t.Errorf("routes with an env sql key proven effectively-once: %d; W021 warnings: %d", proven, warned)
	}
	t.Logf("env keys: %v; effectively-once with an env sql key: %d; W021: %d", seen, proven, warned)
}
