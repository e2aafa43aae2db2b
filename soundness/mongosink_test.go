package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
)

// mongoMarks are the texts by which each shape of mongosink.go shows in a
// generated file.
var mongoMarks = map[string]*regexp.Regexp{
	"id_field a payload field":          regexp.MustCompile(`id_field\s*= "(id|seq)"`),
	"id_field a stable template":        regexp.MustCompile(`id_field\s*= "(ord-\$\{payload\.id\}|\$\{payload\.id\}/\$\{payload\.region\})"`),
	"id_field the id step's mqb.id":     regexp.MustCompile(`id_field\s*= "\$\{meta\[\\"mqb\.id\\"\]\}"`),
	"id_field by the clock":             regexp.MustCompile(`id_field\s*= "\$\{string\(now\(\)\.UnixNano\(\)\)\}"`),
	"id_field by message_id":            regexp.MustCompile(`id_field\s*= "m-\$\{message_id\}"`),
	"no id_field":                       regexp.MustCompile(`collection\s*= "route_._m\d+"\n(\s*report_outcome\s*= true\n)?\s*\}`),
	"report_outcome":                    regexp.MustCompile(`report_outcome\s*= true`),
	"the call of a request":             regexp.MustCompile(`call mongodb \{`),
	"a switch on the call's outcome":    regexp.MustCompile(`on = meta\["mongodb\.outcome"\]`),
	"a handler":                         regexp.MustCompile(`handle mongodb \{`),
	"a filter on the handler's outcome": regexp.MustCompile(`filter meta\["mongodb\.outcome"\] != "existed"`),
}

// mongoBlockRE is one formatted mongodb sink of a generated route.
var mongoBlockRE = regexp.MustCompile(`(?s)mongodb \{\n(.*?)\n\s*\}`)

// The generator, with -mongo-sinks, draws mongodb sinks of every id_field
// form, each read back by an artifact of its own; a sink keyed by the
// clock or by nothing is neither effectively-once nor compared by its
// _id, and many sinks the compiler proves idempotent by their _id are
// compared by it. (A stable message_id, as some sources have, the harness
// reads as volatile: the documents are then a multiset, which still
// counts a duplicate.) The files build, or are refused only for a
// report_outcome without a stable key, drawn on purpose now and then.
func TestMongoSinkShapesDrawn(t *testing.T) {
	mongoSinks = true
	defer func() { mongoSinks = false }()
	seen := map[string]int{}
	var built, stable, perDelivery, firstWins, refused int
	for seed := uint64(11); seed <= 410; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		if !c.mongoDrawn {
			if strings.Contains(c.Source, mongoSinkURL) {
				t.Fatalf("seed %d has a mongodb sink but is not marked as drawing one", seed)
			}
			continue
		}
		if bigIDRE.MatchString(c.Input) && strings.Contains(c.Input, `"id":12345678901234567`) {
			t.Errorf("seed %d: an id past int64 is left unquoted in a case with mongodb sinks", seed)
		}
		for name, re := range mongoMarks {
			if re.MatchString(c.Source) {
				seen[name]++
			}
		}
		p, diags := compiler.CompileSources([]compiler.Source{{Name: "routes.mqb", Src: []byte(c.Source)}})
		if diags.HasErrors() {
			for _, d := range diags {
				if s := d.Code + ": " + d.Summary; d.Severity == diag.Error && strings.Contains(s, "mongodb") && d.Code != "E043" {
					t.Errorf("seed %d: refused for a mongodb sink: %s\n%s", seed, s, c.Source)
				}
			}
			refused++
			continue
		}
		built++
		byName := map[string]plan.Route{}
		for _, r := range p.Routes {
			byName[r.Name] = r
		}
		for _, r := range c.Routes {
			blocks := mongoBlockRE.FindAllStringSubmatch(r.Source, -1)
			var arts []Artifact
			for _, a := range r.Artifacts {
				if a.Kind == "mongo" {
					arts = append(arts, a)
				}
			}
			if len(arts) != len(blocks) {
				t.Fatalf("seed %d route %s: %d mongodb sinks, %d artifacts:\n%s", seed, r.Name, len(blocks), len(arts), r.Source)
			}
			v := byName[r.Name]
			reasons := strings.Join(v.Reasons, "\n")
			once := v.Guarantee == "effectively-once" || v.Guarantee == "exactly-once"
			for _, a := range arts {
				var block string
				for _, b := range blocks {
					if regexp.MustCompile(`collection\s*= "` + a.Table + `"`).MatchString(b[1]) {
						block = b[1]
					}
				}
				if a.Path != mongoSinkDB || block == "" {
					t.Fatalf("seed %d route %s: artifact %+v is not one of its sinks:\n%s", seed, r.Name, a, r.Source)
				}
				byClock, none := strings.Contains(block, "now()"), !strings.Contains(block, "id_field")
				if (byClock || none) && (once || !slices.Contains(a.Volatile, "_id")) {
					t.Errorf("seed %d route %s: %s has no stable key, yet the route is %s (the harness reads its _id as volatile: %v):\n%s\n%s",
						seed, r.Name, a.Table, v.Guarantee, slices.Contains(a.Volatile, "_id"), reasons, r.Source)
				}
				if slices.Contains(a.Volatile, "_id") {
					perDelivery++
					continue
				}
				if a.FirstWins {
					firstWins++
				}
				if !slices.Contains(a.Mutable, mongoAllFields) {
					t.Errorf("seed %d route %s: %s has a stable _id but its fields are not compared by it: %+v", seed, r.Name, a.Table, a)
				}
				if strings.Contains(reasons, "(stable); a repeat hits the unique _id index") {
					// The harness and the prover agree: compared by _id.
					stable++
				}
			}
		}
	}
	for name := range mongoMarks {
		if seen[name] == 0 {
			t.Errorf("no generated case over seeds 11-410 has the mongodb shape %s", name)
		}
	}
	if built < 20 || stable == 0 || perDelivery == 0 || firstWins == 0 || refused == 0 {
		t.Errorf("%d files built (%d refused); mongodb sinks with a stable _id %d (%d by _id alone), per-delivery %d", built, refused, stable, firstWins, perDelivery)
	}
	t.Logf("shapes: %v; built %d, refused %d; stable %d (first wins %d), per-delivery %d", seen, built, refused, stable, firstWins, perDelivery)

	mongoSinks = false
	for seed := uint64(11); seed <= 60; seed++ {
		c, err := generate(seed, 3)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.Source, mongoSinkURL) || c.mgs != nil {
			t.Fatalf("seed %d draws a mongodb sink without -mongo-sinks", seed)
		}
	}
}

// A document is read back field by field: volatile fields as "*", every
// field but _id left out of the loss check's row under a stable key, and
// out of the comparison's too when the first record of a key to arrive
// is the workers' order.
func TestMongoRow(t *testing.T) {
	doc, err := bson.Marshal(bson.D{{Key: "_id", Value: "k-1"}, {Key: "qty", Value: int64(3)}, {Key: "stamp", Value: "123"}, {Key: "big", Value: int64(9007199254740993)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		art        Artifact
		full, kept string
	}{
		{Artifact{Volatile: []string{"stamp"}}, `_id="k-1" big=9007199254740993 qty=3 stamp=*`, `_id="k-1" big=9007199254740993 qty=3 stamp=*`},
		{Artifact{Volatile: []string{"_id"}}, `_id=* big=9007199254740993 qty=3 stamp="123"`, `_id=* big=9007199254740993 qty=3 stamp="123"`},
		{Artifact{Mutable: []string{mongoAllFields}}, `_id="k-1" big=9007199254740993 qty=3 stamp="123"`, `_id="k-1"`},
		{Artifact{Mutable: []string{mongoAllFields}, FirstWins: true}, `_id="k-1"`, `_id="k-1"`},
	} {
		full, kept, err := mongoRow(doc, tc.art)
		if err != nil {
			t.Fatal(err)
		}
		if full != tc.full || kept != tc.kept {
			t.Errorf("%+v: full %s, kept %s; want %s, %s", tc.art, full, kept, tc.full, tc.kept)
		}
		if got, want := keyProjected(Artifact{Kind: "mongo", Mutable: tc.art.Mutable, Volatile: tc.art.Volatile}), len(tc.art.Mutable) > 0; got != want {
			t.Errorf("%+v: keyProjected %v", tc.art, got)
		}
	}
	in := "{\"id\":12345678901234567001,\"qty\":1}\n{\"id\":9007199254740993}\n{\"id\":\"k-1\"}\n"
	if got, want := mongoSafeInput(in), "{\"id\":\"12345678901234567001\",\"qty\":1}\n{\"id\":9007199254740993}\n{\"id\":\"k-1\"}\n"; got != want {
		t.Errorf("mongoSafeInput: %q, want %q", got, want)
	}
}

// Over the mongodb capture source, whose payloads carry the captured
// document's _id, a mongodb sink keeps it (id_field "_id"), mostly
// unwrapped by a map from {"$oid": …} to its hex string; the sink, keyed
// by a stable _id, is compared by it, and the route builds. A route whose
// map replaced the whole payload has no _id left and draws any form.
// Without -mongo-sinks such a case is as it was: no sink, no map.
func TestMongoSinkOverMongoSource(t *testing.T) {
	const unwrap = `map { payload._id = payload._id["$oid"] }`
	replaced := regexp.MustCompile(`(?m)^\s*(map \{\n\s*)?payload = \{`)
	afterSource := regexp.MustCompile(`poll_interval = 100ms\n\s*\}\n\s*` + regexp.QuoteMeta(unwrap) + "\n")
	mongoSinks = true
	defer func() { mongoSinks = false }()
	var sinks, unwrapped, kept, other, effectivelyOnceRoutes int
	for seed := uint64(11); seed <= 400; seed++ {
		c, err := generateFrom(seed, 3, brokerMongo)
		if err != nil {
			t.Fatal(err)
		}
		if !c.mongoDrawn {
			continue
		}
		p, diags := compiler.CompileSources([]compiler.Source{{Name: "routes.mqb", Src: []byte(c.Source)}})
		if diags.HasErrors() {
			for _, d := range diags {
				if s := d.Code + ": " + d.Summary; d.Severity == diag.Error && strings.Contains(s, "mongodb") && d.Code != "E043" {
					t.Errorf("seed %d: refused for a mongodb sink: %s\n%s", seed, s, c.Source)
				}
			}
			continue
		}
		byName := map[string]plan.Route{}
		for _, r := range p.Routes {
			byName[r.Name] = r
		}
		for _, r := range c.Routes {
			var blocks []string
			for _, b := range mongoBlockRE.FindAllStringSubmatch(r.Source, -1) {
				if strings.Contains(b[1], mongoSinkURL) {
					blocks = append(blocks, b[1])
				}
			}
			if len(blocks) == 0 {
				continue
			}
			hasUnwrap := strings.Contains(r.Source, unwrap)
			if hasUnwrap && !afterSource.MatchString(r.Source) {
				t.Errorf("seed %d route %s: the _id is unwrapped, but not right after the source:\n%s", seed, r.Name, r.Source)
			}
			if replaced.MatchString(r.Source) {
				// (Which sink comes after the replacement the text does
				// not say simply; the shapes test covers these forms.)
				other++
				continue
			}
			if hasUnwrap {
				unwrapped++
			} else {
				kept++
			}
			for _, b := range blocks {
				sinks++
				if !regexp.MustCompile(`id_field\s*= "_id"`).MatchString(b) {
					t.Errorf("seed %d route %s: a mongodb sink over the mongodb source without id_field \"_id\":\n%s", seed, r.Name, r.Source)
				}
			}
			for _, a := range r.Artifacts {
				if a.Kind == "mongo" && (slices.Contains(a.Volatile, "_id") || !slices.Contains(a.Mutable, mongoAllFields)) {
					t.Errorf("seed %d route %s: %s is keyed by the captured _id, yet not compared by it: %+v", seed, r.Name, a.Table, a)
				}
			}
			if v := byName[r.Name]; v.Guarantee == "effectively-once" {
				effectivelyOnceRoutes++
				if !strings.Contains(strings.Join(v.Reasons, "\n"), "_id = payload._id (stable)") {
					t.Errorf("seed %d route %s: effectively-once, but not by the captured _id: %v", seed, r.Name, v.Reasons)
				}
			}
		}
	}
	if sinks == 0 || unwrapped == 0 || kept == 0 || effectivelyOnceRoutes == 0 {
		t.Errorf("mongodb sinks over the mongodb source %d: routes unwrapping the _id %d, keeping it %d, effectively-once %d", sinks, unwrapped, kept, effectivelyOnceRoutes)
	}
	t.Logf("mongodb sinks over the mongodb source %d: routes unwrapping the _id %d, keeping it %d, payload replaced %d; effectively-once routes %d",
		sinks, unwrapped, kept, other, effectivelyOnceRoutes)

	mongoSinks = false
	for seed := uint64(11); seed <= 60; seed++ {
		c, err := generateFrom(seed, 3, brokerMongo)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.Source, mongoSinkURL) || strings.Contains(c.Source, "payload._id") {
			t.Fatalf("seed %d over the mongodb source draws a mongodb sink or unwraps the _id without -mongo-sinks:\n%s", seed, c.Source)
		}
	}
}
