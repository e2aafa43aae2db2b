package runtime_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// orderStep is one generated step: a map that appends its tag to
// payload.trace (and "h" when it runs after the handler's report_outcome
// tagged the record), or a filter that keeps a record only when the
// trace is what the steps before it, in order, must have made it.
type orderStep struct {
	kind string // map | filter
	out  bool   // written on the output side
	tag  string
}

// stepOrderSrc writes a route over in.jsonl with steps in the order
// given (input-side ones first, as the language requires), a SQL handler
// with report_outcome when handler is set (else a retry step marks where
// the output side starts), and a file sink.
func stepOrderSrc(steps []orderStep, handler bool) string {
	var b strings.Builder
	b.WriteString("route ordered {\n  from file { path = \"in.jsonl\" }\n  id payload.id\n  dedup { key = meta[\"mqb.id\"] }\n")
	trace := ""
	wrote := false
	for _, s := range steps {
		if s.out && !wrote {
			wrote = true
			if handler {
				b.WriteString(`  handle sql {
    url            = "sqlite://seen.db"
    create_table   = "CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY, trace TEXT NOT NULL)"
    insert_query   = "INSERT INTO seen (id, trace) VALUES (${meta[\"mqb.id\"]}, ${payload.trace}) ON CONFLICT (id) DO NOTHING"
    report_outcome = true
  }
`)
			} else {
				b.WriteString("  retry { attempts = 1 }\n")
			}
		}
		h := ""
		if s.out && handler {
			h = "h"
		}
		switch s.kind {
		case "map":
			fmt.Fprintf(&b, "  map { trace = payload.trace + %q + ((meta[\"sql.outcome\"] ?? \"\") == \"inserted\" ? \"h\" : \"\") }\n", "|"+s.tag)
			trace += "|" + s.tag + h
		case "filter":
			fmt.Fprintf(&b, "  filter %q != \"\" && payload.trace == %q\n", "tag:"+s.tag, trace)
		}
	}
	if !wrote && handler {
		b.WriteString(`  handle sql {
    url            = "sqlite://seen.db"
    create_table   = "CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY, trace TEXT NOT NULL)"
    insert_query   = "INSERT INTO seen (id, trace) VALUES (${meta[\"mqb.id\"]}, ${payload.trace}) ON CONFLICT (id) DO NOTHING"
    report_outcome = true
  }
`)
	}
	b.WriteString("  to file { path = \"out.jsonl\" }\n}\n")
	return b.String()
}

var stepTagRE = regexp.MustCompile(`"(?:\||tag:)(s\d+)"`)

// planOrder reads, from the plan, the order of the generated steps and
// where the handler stands: what the runtime must execute. It returns the
// trace the sink must see and the trace the handler must see.
func planOrder(t *testing.T, r plan.Route) (tags []string, sinkTrace, handlerTrace string) {
	t.Helper()
	handled := false
	handlerTrace = "-"
	for _, n := range r.Nodes {
		switch {
		case n.Role == plan.RoleHandler:
			handled = true
			handlerTrace = sinkTrace
		case n.Role == plan.RoleStep && (n.Kind == "map" || n.Kind == "filter"):
			src := n.Expr
			if n.Kind == "map" {
				src = n.Attrs["trace"].Expr
			}
			m := stepTagRE.FindStringSubmatch(src)
			if m == nil {
				t.Fatalf("no tag in %s step %q", n.Kind, src)
			}
			tags = append(tags, m[1])
			if n.Kind == "map" {
				sinkTrace += "|" + m[1]
				if handled {
					sinkTrace += "h"
				}
			}
		}
	}
	return tags, sinkTrace, handlerTrace
}

// TestStepOrderFollowsPlan generates, for every step kind allowed on both
// sides (map, filter) and every position (input side, output side, with
// and without a handler), routes of one and two steps, and checks that the
// runtime runs them in the order the plan states: input steps, handler,
// output steps, sink.
func TestStepOrderFollowsPlan(t *testing.T) {
	var kinds []orderStep
	for _, k := range []string{"map", "filter"} {
		for _, out := range []bool{false, true} {
			kinds = append(kinds, orderStep{kind: k, out: out})
		}
	}
	var seqs [][]orderStep
	for _, a := range kinds {
		seqs = append(seqs, []orderStep{a})
		for _, b := range kinds {
			if a.out && !b.out {
				continue // the language puts input steps first
			}
			seqs = append(seqs, []orderStep{a, b})
		}
	}
	const n = 12
	for _, handler := range []bool{false, true} {
		for _, seq := range seqs {
			var name []string
			steps := make([]orderStep, len(seq))
			for i, s := range seq {
				s.tag = fmt.Sprintf("s%d", i)
				steps[i] = s
				side := "in"
				if s.out {
					side = "out"
				}
				name = append(name, s.kind+"@"+side)
			}
			title := strings.Join(name, ",")
			if handler {
				title += "+handler"
			}
			t.Run(title, func(t *testing.T) {
				dir := t.TempDir()
				var lines []string
				for i := range n {
					lines = append(lines, fmt.Sprintf(`{"id":"r%02d","trace":""}`, i))
				}
				writeLines(t, filepath.Join(dir, "in.jsonl"), lines...)
				src := stepOrderSrc(steps, handler)
				p := compileMQB(t, src)
				tags, wantSink, wantHandler := planOrder(t, p.Routes[0])
				var srcTags []string
				for _, s := range steps {
					srcTags = append(srcTags, s.tag)
				}
				if strings.Join(tags, ",") != strings.Join(srcTags, ",") {
					t.Fatalf("plan order %v, written order %v", tags, srcTags)
				}
				st := runIn(t, dir, p).Route("ordered")
				if st.Out != n || st.Filtered != 0 {
					t.Errorf("stats %+v: want all %d out, none filtered (a filter saw a trace out of plan order)\n%s", st, n, src)
				}
				for id, got := range outTraces(t, filepath.Join(dir, "out.jsonl")) {
					if got != wantSink {
						t.Errorf("%s reached the sink with trace %q, want %q (plan order)\n%s", id, got, wantSink, src)
						break
					}
				}
				if handler {
					for id, got := range sqliteMap[string](t, filepath.Join(dir, "seen.db"), `SELECT id, trace FROM seen`) {
						if got != wantHandler {
							t.Errorf("the handler saw %s with trace %q, want %q (plan order)\n%s", id, got, wantHandler, src)
							break
						}
					}
				}
			})
		}
	}
}

// TestOutcomeFilterAfterHandler: a filter written after a handler with
// report_outcome sees the outcome, and forwards the records the handler
// inserted, not the ones that existed already.
func TestOutcomeFilterAfterHandler(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf(`{"id":"r%02d","trace":""}`, i%15)) // r00..r04 twice
	}
	writeLines(t, filepath.Join(dir, "in.jsonl"), lines...)
	src := `
route outcome {
  from file { path = "in.jsonl" }
  handle sql {
    url            = "sqlite://seen.db"
    create_table   = "CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY)"
    insert_query   = "INSERT INTO seen (id) VALUES (${payload.id}) ON CONFLICT (id) DO NOTHING"
    report_outcome = true
  }
  filter meta["sql.outcome"] == "inserted"
  map { outcome = meta["sql.outcome"] }
  to file { path = "out.jsonl" }
}
`
	st := runIn(t, dir, compileMQB(t, src)).Route("outcome")
	if st.Out != 15 || st.Filtered != 5 {
		t.Errorf("stats %+v: want 15 new records out, 5 existing filtered", st)
	}
	got := outTraces(t, filepath.Join(dir, "out.jsonl"))
	if len(got) != 15 {
		t.Errorf("%d distinct ids reached the sink, want 15", len(got))
	}
	data, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
	if c := strings.Count(string(data), `"outcome":"inserted"`); c != 15 {
		t.Errorf("%d records carry outcome inserted, want 15:\n%s", c, data)
	}
}

// outTraces reads payload.trace of every record in a file sink's output,
// by id.
func outTraces(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v struct {
			ID    string `json:"id"`
			Trace string `json:"trace"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %q: %v", path, sc.Text(), err)
		}
		out[v.ID] = v.Trace
	}
	return out
}

// TestCrashHandlerOutputSteps SIGKILLs a route whose map and filter stand
// after the handler: after the last run the handler has seen every record,
// and the sink holds exactly the records the filter keeps, each as the map
// (run after the handler) left it.
func TestCrashHandlerOutputSteps(t *testing.T) {
	bin := buildCrashHelper(t)
	dir := t.TempDir()
	const n = 40000
	var lines []string
	want := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("o-%06d", i)
		lines = append(lines, fmt.Sprintf(`{"id":%q,"amount":%d}`, id, i))
		if i%5 != 0 {
			want[id] = true
		}
	}
	writeLines(t, filepath.Join(dir, "in.jsonl"), lines...)
	src := fmt.Sprintf(`
route handled {
  batch_size = 256
  from file { path = %[1]q, checkpoint_store = %[2]q }
  id payload.id
  handle sql {
    url          = %[3]q
    create_table = "CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY, via TEXT)"
    insert_query = "INSERT INTO seen (id, via) VALUES (${meta[\"mqb.id\"]}, ${payload.via}) ON CONFLICT (id) DO NOTHING"
  }
  map { via = "after-handler" }
  filter payload.amount %% 5 != 0
  to sql {
    url          = %[4]q
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, via TEXT NOT NULL)"
    insert_query = "INSERT INTO orders (id, via) VALUES (${meta[\"mqb.id\"]}, ${payload.via}) ON CONFLICT (id) DO NOTHING"
  }
}
`, filepath.Join(dir, "in.jsonl"), "pebble://"+filepath.Join(dir, "state"),
		"sqlite://"+filepath.Join(dir, "seen.db"), "sqlite://"+filepath.Join(dir, "orders.db"))
	p := compileMQB(t, src)
	st := crashAndFinish(t, bin, p, dir, 41, 5).Route("handled")
	checkCounts(t, st)
	if st.Committed != n {
		t.Errorf("committed %d of %d", st.Committed, n)
	}
	seen := sqliteMap[string](t, filepath.Join(dir, "seen.db"), `SELECT id, coalesce(via, '') FROM seen`)
	if len(seen) != n {
		t.Errorf("the handler saw %d of %d records", len(seen), n)
	}
	for id, via := range seen {
		if via != "" {
			t.Errorf("the handler saw %s after the map (via %q)", id, via)
			break
		}
	}
	orders := sqliteMap[string](t, filepath.Join(dir, "orders.db"), `SELECT id, via FROM orders`)
	if len(orders) != len(want) {
		t.Errorf("the sink holds %d records, want %d", len(orders), len(want))
	}
	for id, via := range orders {
		if !want[id] || via != "after-handler" {
			t.Errorf("sink row %s via %q: want only kept records, mapped after the handler", id, via)
			break
		}
	}
}
