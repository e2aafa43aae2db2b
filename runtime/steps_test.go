package runtime_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/plan"
)

var (
	fileRoute = plantest.FileRoute
	readLines = plantest.ReadLines
)

func TestFilterMapSteps(t *testing.T) {
	d := t.TempDir()
	in, out, dlq := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "dlq.jsonl")
	input := strings.Join([]string{
		`{"n": 1, "name": "a"}`,
		`{"n": 2, "name": "b"}`,
		``, // blank lines are skipped, not numbered
		`{"n": 4, "name": "c", "big": 9007199254740993}`,
		`[1, 2]`, // payload.n on an array: the filter fails → DLQ
		`{"n": "six"}`,
		`{"n": 8, "name": "d"}`,
	}, "\n") // no trailing newline: the last line still counts
	if err := os.WriteFile(in, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	p := fileRoute("steps", in, out, dlq, filepath.Join(d, "state"),
		plan.Node{ID: "f", Role: plan.RoleStep, Kind: "filter", Expr: `payload.n % 2 == 0`},
		plan.Node{ID: "m", Role: plan.RoleStep, Kind: "map", Attrs: map[string]plan.Value{
			"double": exprV("payload.n * 2"),
			"tag":    strV("even"),
			"upper":  exprV("upper(payload.name)"),
		}},
	)
	rs := runRoute(t, p, "steps")
	if rs.In != 6 || rs.Out != 3 || rs.Filtered != 1 || rs.DeadLettered != 2 {
		t.Errorf("stats %+v: want in 6, out 3, filtered 1, dead-lettered 2", rs)
	}
	want := []string{
		`{"double":4,"n":2,"name":"b","tag":"even","upper":"B"}`,
		`{"big":9007199254740993,"double":8,"n":4,"name":"c","tag":"even","upper":"C"}`,
		`{"double":16,"n":8,"name":"d","tag":"even","upper":"D"}`,
	}
	if got := readLines(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range readLines(t, dlq) {
		var env struct {
			Error    string          `json:"error"`
			Position int             `json:"position"`
			Payload  json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(env.Error, "filter") {
			t.Errorf("dlq reason %q does not name the filter", env.Error)
		}
		if env.Position != 3 && env.Position != 4 {
			t.Errorf("dlq holds position %d, want 3 or 4", env.Position)
		}
	}
}

func TestTextFormatAndMaxRecordBytes(t *testing.T) {
	d := t.TempDir()
	in, out, dlq := filepath.Join(d, "in.txt"), filepath.Join(d, "out.txt"), filepath.Join(d, "dlq.jsonl")
	long := strings.Repeat("y", 5000)
	if err := os.WriteFile(in, []byte("hello\r\nnot json {\n"+long+"\nbye\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := fileRoute("text", in, out, dlq, filepath.Join(d, "state"),
		plan.Node{ID: "f", Role: plan.RoleStep, Kind: "filter", Expr: `payload != "bye"`})
	p.Routes[0].Nodes[0].Attrs["format"] = enumV("text")
	p.Routes[0].Nodes[0].Attrs["max_record_bytes"] = intV(100)
	runRoute(t, p, "text")
	if got := readLines(t, out); strings.Join(got, "|") != "hello|not json {" {
		t.Errorf("output %q", got)
	}
	dl := readLines(t, dlq)
	if len(dl) != 1 || !strings.Contains(dl[0], "exceeds max_record_bytes") || len(dl[0]) > 2*runtime.DLQSnippetBytes {
		t.Errorf("dlq %d lines, first %.200q", len(dl), dl)
	}
}

// assignV is a map assignment of an expression (expr == "": a delete).
func assignV(target string, path []string, expr string) plan.Assignment {
	a := plan.Assignment{Target: target, Path: path, Delete: expr == ""}
	if expr != "" {
		v := exprV(expr)
		a.Value = &v
	}
	return a
}

// TestMapPaths runs map's assignment forms: nested paths that create the
// objects on the way, deletes (of what is missing too), meta keys, every
// value computed from the record as it entered the block; a record whose
// path runs into a value that is not an object goes to the DLQ naming it.
func TestMapPaths(t *testing.T) {
	d := t.TempDir()
	in, out, dlq := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "dlq.jsonl")
	input := strings.Join([]string{
		`{"email": "A@X.COM", "tmp": 1, "a": {"b": 1, "c": 2}, "t": "acme"}`,
		`{"email": "b@x.com", "customer": {"name": "B"}, "a": {"c": 3}, "t": 7}`,
		`{"email": "c@x.com", "customer": "not an object"}`,
		`{"email": "d@x.com", "customer": null}`,
		`"a string payload"`,
		`{"email": 5}`,
	}, "\n")
	if err := os.WriteFile(in, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	p := fileRoute("paths", in, out, dlq, filepath.Join(d, "state"),
		plan.Node{ID: "m", Role: plan.RoleStep, Kind: "map", Assign: []plan.Assignment{
			assignV(plan.TargetPayload, []string{"customer", "email"}, `type(payload) == "map" ? lower(string(payload.email)) : "none"`),
			assignV(plan.TargetPayload, []string{"tmp"}, ""),
			assignV(plan.TargetPayload, []string{"a", "b"}, ""),
			assignV(plan.TargetPayload, []string{"gone", "x"}, ""),
			assignV(plan.TargetPayload, []string{"before"}, "payload"),
			assignV(plan.TargetMeta, []string{"tenant"}, `type(payload) == "map" ? payload.t : nil`),
		}},
		plan.Node{ID: "m2", Role: plan.RoleStep, Kind: "map", Attrs: map[string]plan.Value{
			"tenant": exprV(`meta["tenant"]`),
		}},
	)
	rs := runRoute(t, p, "paths")
	if rs.In != 6 || rs.Out != 3 || rs.DeadLettered != 3 {
		t.Errorf("stats %+v: want in 6, out 3, dead-lettered 3", rs)
	}
	want := []string{
		`{"a":{"c":2},"before":{"a":{"b":1,"c":2},"email":"A@X.COM","t":"acme","tmp":1},"customer":{"email":"a@x.com"},"email":"A@X.COM","t":"acme","tenant":"acme"}`,
		`{"a":{"c":3},"before":{"a":{"c":3},"customer":{"name":"B"},"email":"b@x.com","t":7},"customer":{"email":"b@x.com","name":"B"},"email":"b@x.com","t":7,"tenant":"7"}`,
		`{"before":{"email":5},"customer":{"email":"5"},"email":5,"tenant":""}`,
	}
	if got := readLines(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var reasons []string
	for _, l := range readLines(t, dlq) {
		var env struct {
			Error   string          `json:"error"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal([]byte(l), &env); err != nil {
			t.Fatal(err)
		}
		reasons = append(reasons, env.Error)
	}
	wantReasons := []string{
		"map payload.customer.email: payload.customer is a string, not an object",
		"map payload.customer.email: payload.customer is null, not an object",
		"map payload.customer.email: payload is a string, not a JSON object",
	}
	if strings.Join(reasons, "\n") != strings.Join(wantReasons, "\n") {
		t.Errorf("dlq reasons:\n%s\nwant:\n%s", strings.Join(reasons, "\n"), strings.Join(wantReasons, "\n"))
	}
}

// TestMapReplacesTextPayload: a map that only replaces the whole payload
// takes any payload, a text line too, which it turns into JSON ('<', '>'
// and '&' as themselves, not escaped for HTML).
func TestMapReplacesTextPayload(t *testing.T) {
	d := t.TempDir()
	in, out := filepath.Join(d, "in.txt"), filepath.Join(d, "out.jsonl")
	if err := os.WriteFile(in, []byte("first line\nsecond \"quoted\" line\na <b> & c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := fileRoute("text", in, out, "", filepath.Join(d, "state"),
		plan.Node{ID: "m", Role: plan.RoleStep, Kind: "map", Assign: []plan.Assignment{
			assignV(plan.TargetPayload, nil, `{"line": payload}`),
			assignV(plan.TargetMeta, []string{"len"}, "len(payload)"),
		}},
		plan.Node{ID: "m2", Role: plan.RoleStep, Kind: "map", Assign: []plan.Assignment{
			assignV(plan.TargetPayload, []string{"meta", "len"}, `meta["len"]`),
		}},
	)
	p.Routes[0].Nodes[0].Attrs["format"] = enumV("text")
	rs := runRoute(t, p, "text")
	if rs.In != 3 || rs.Out != 3 || rs.DeadLettered != 0 {
		t.Errorf("stats %+v: want in 3, out 3", rs)
	}
	want := `{"line":"first line","meta":{"len":"10"}}` + "\n" + `{"line":"second \"quoted\" line","meta":{"len":"20"}}` + "\n" + `{"line":"a <b> & c","meta":{"len":"9"}}`
	if got := strings.Join(readLines(t, out), "\n"); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestMapWritesNoSharedObject: a value copied from the payload, or a
// literal object, is never written through by a later map: each write
// copies the objects on its path.
func TestMapWritesNoSharedObject(t *testing.T) {
	d := t.TempDir()
	in, out := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl")
	if err := os.WriteFile(in, []byte(`{"orig": {"v": 1}}`+"\n"+`{"orig": {"v": 2}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lit := plan.Value{Type: plan.TBlock, Block: map[string]plan.Value{"n": intV(0)}}
	p := fileRoute("alias", in, out, "", filepath.Join(d, "state"),
		plan.Node{ID: "m1", Role: plan.RoleStep, Kind: "map", Assign: []plan.Assignment{
			assignV(plan.TargetPayload, []string{"copy"}, "payload.orig"),
			{Target: plan.TargetPayload, Path: []string{"lit"}, Value: &lit},
		}},
		plan.Node{ID: "m2", Role: plan.RoleStep, Kind: "map", Assign: []plan.Assignment{
			assignV(plan.TargetPayload, []string{"copy", "x"}, "payload.orig.v * 10"),
			assignV(plan.TargetPayload, []string{"lit", "n"}, "payload.orig.v"),
		}},
	)
	runRoute(t, p, "alias")
	want := `{"copy":{"v":1,"x":10},"lit":{"n":1},"orig":{"v":1}}` + "\n" + `{"copy":{"v":2,"x":20},"lit":{"n":2},"orig":{"v":2}}`
	if got := strings.Join(readLines(t, out), "\n"); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}
