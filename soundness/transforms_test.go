package main

import (
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/lang"
)

// Drawing unnest and parse changed no seed that did not draw them, and
// kept the routes of one that did (the same number, the same names).
func TestTransformsLeaveOtherSeeds(t *testing.T) {
	drawn := 0
	for seed := uint64(1); seed <= 300; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		transforms = false
		before, err := generate(seed, 3)
		transforms = true
		if err != nil {
			t.Fatal(err)
		}
		if c.tx == nil {
			if before.Source != c.Source || before.Input != c.Input {
				t.Errorf("seed %d changed:\n%s\nwas:\n%s", seed, c.Source, before.Source)
			}
			continue
		}
		drawn++
		if seed <= 10 {
			t.Errorf("seed %d, one of CI's fixed seeds, draws the transforms", seed)
		}
		if before.Broker != "" || before.Mode != "" || len(before.Routes) != len(c.Routes) {
			t.Errorf("seed %d: the transforms changed more than the routes' steps and input", seed)
		}
	}
	if drawn == 0 {
		t.Errorf("no seed of 300 draws unnest or parse")
	}
	t.Logf("%d of 300 seeds draw the transforms", drawn)
}

// The transforms cases reach every form of unnest and parse, their input
// has the items arrays (empty ones, and a value that is not an array) and
// lines in the text forms, and no unnest follows a dedup (E060).
func TestTransformsDrawn(t *testing.T) {
	want := []string{"unnest payload.items as item", "unnest payload.items\n", "format = text", "parse { format = json }",
		"parse { format = logfmt }", "format = csv", `pattern = "\"id`, `"items":[]`, `"items":"x"`, `"items":[{`, " seq=", "dedup", "id payload.id"}
	seen := map[string]int{}
	for seed := uint64(11); seed <= 400; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		if c.tx == nil {
			continue
		}
		for _, w := range want {
			if strings.Contains(c.Source, w) || strings.Contains(c.Input, w) {
				seen[w]++
			}
		}
		if c.textForm == "csv" && !strings.Contains(c.Input, "\nk-") {
			t.Errorf("seed %d: a csv case without a CSV line", seed)
		}
		for _, r := range c.Routes {
			if _, diags := lang.Parse("routes.mqb", []byte(r.Source)); diags.HasErrors() {
				t.Fatalf("seed %d: %v\n%s", seed, diags, r.Source)
			}
			u := strings.Index(r.Source, "unnest")
			if d := strings.Index(r.Source, "dedup"); u >= 0 && d >= 0 && d < u {
				t.Errorf("seed %d: a dedup before unnest (E060):\n%s", seed, r.Source)
			}
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			t.Errorf("no transforms case of seeds 11..400 has %q", w)
		}
	}
	t.Logf("%v", seen)
}

// A CSV or logfmt line carries the fields a parse of it names, in order.
func TestTextLine(t *testing.T) {
	rec := map[string]any{"id": "k-1", "seq": 4, "qty": 2, "big": 9, "region": "eu", "body": "b4"}
	for _, tc := range []struct{ form, want string }{
		{"csv", "k-1,4,2,9,eu,b4,"},
		{"logfmt", "id=k-1 seq=4 qty=2 big=9 region=eu body=b4"},
	} {
		if got := textLine(rec, tc.form); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.form, got, tc.want)
		}
	}
}
