package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
)

var objMarks = map[string]*regexp.Regexp{
	"file://":                   regexp.MustCompile(`url\s*= "file://out/route_.__o\d+"`),
	"s3://":                     regexp.MustCompile(`url\s*= "s3://sink/out/route_.__o\d+"`),
	"name_by unset":             regexp.MustCompile(`object_store \{ url = "[^"]*"(, path_style = true)?(, max_object_bytes = \d+)? \}`),
	"name_by = auto":            regexp.MustCompile(`name_by\s*= auto`),
	"name_by = source_position": regexp.MustCompile(`url\s*= "(file|s3)://[^"]*",?\s*(path_style\s*= true,?\s*)?name_by\s*= source_position`),
	"name_by = write_time":      regexp.MustCompile(`url\s*= "(file|s3)://[^"]*",?\s*(path_style\s*= true,?\s*)?name_by\s*= write_time`),
	"date_partition":            regexp.MustCompile(`date_partition\s*= true`),
	"small objects":             regexp.MustCompile(`max_object_bytes\s*= \d+`),
}

// The generator writes object_store sinks, file:// and s3://, under each
// naming, each read back as a directory of parts; the compiler builds
// them (no name_by = source_position over a source without a position),
// and auto resolves to source_position over a source with one.
func TestObjectStoreShapesDrawn(t *testing.T) {
	seen := map[string]int{}
	resolved := 0
	for seed := uint64(11); seed <= 410; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Source, "object_store {") || strings.Contains(c.Source, "from object_store") && strings.Count(c.Source, "object_store {") == len(c.Routes) {
			continue
		}
		if !c.ruleDrawn {
			t.Errorf("seed %d draws an object_store sink but is not checked under -rules", seed)
		}
		for name, re := range objMarks {
			if re.MatchString(c.Source) {
				seen[name]++
			}
		}
		for _, r := range c.Routes {
			for _, m := range regexp.MustCompile(`"(file://|s3://sink/)(out/route_.__o\d+)"`).FindAllStringSubmatch(r.Source, -1) {
				found := false
				for _, a := range r.Artifacts {
					found = found || a.Kind == "parts" && a.Path == m[2]
				}
				if !found {
					t.Errorf("seed %d route %s: the object store %s is not read back", seed, r.Name, m[2])
				}
			}
		}
		p, diags := compiler.CompileSources([]compiler.Source{{Name: "routes.mqb", Src: []byte(c.Source)}})
		for _, d := range diags {
			if d.Severity == diag.Error && strings.Contains(fmt.Sprint(d), "object_store") {
				t.Errorf("seed %d: refused for its object store: %v\n%s", seed, d, c.Source)
			}
		}
		if diags.HasErrors() {
			continue
		}
		for _, r := range p.Routes {
			if strings.Contains(strings.Join(r.Reasons, "\n"), "name_by = auto resolves to source_position") {
				resolved++
			}
		}
	}
	for name := range objMarks {
		if seen[name] == 0 {
			t.Errorf("no file over seeds 11-410 has an object store sink with %s", name)
		}
	}
	if resolved == 0 {
		t.Error("no route's verdict resolves name_by = auto to source_position")
	}
	t.Logf("object store sinks: %v; auto resolved to source_position in %d verdicts", seen, resolved)
}
