package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mqbc "github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// ownedRouteSrc is a route named load reading DIR/NAME.jsonl into DIR/NAME.db,
// with a dedup step (kept: the sink absorbs repeats too) when dedup is
// set. Every plan file in one directory that holds it shares the default
// stores .mqb/state and .mqb/dedup.
func ownedRouteSrc(dir, name string, dedup bool) string {
	step := ""
	if dedup {
		step = `dedup {
    key  = meta["mqb.id"]
    keep = true
  }`
	}
	return fmt.Sprintf(`
route load {
  from file { path = "%[3]s/%[1]s.jsonl" }
  id payload.id
  %[2]s
  to sql {
    url          = "sqlite://%[3]s/%[1]s.db"
    create_table = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, src TEXT NOT NULL)"
    insert_query = "INSERT INTO orders (id, src) VALUES (${meta[\"mqb.id\"]}, ${payload.src}) ON CONFLICT (id) DO NOTHING"
  }
}
`, name, step, dir)
}

// compileAs compiles src as the plan file named file.
func compileAs(t *testing.T, file, src string) plan.Plan {
	t.Helper()
	p, ds := mqbc.CompileSources([]mqbc.Source{{Name: file, Src: []byte(src)}})
	if ds.HasErrors() {
		t.Fatalf("compile %s:\n%v", file, ds)
	}
	return *p
}

// TestStateOwnedByAnotherPlan: a.mqb and b.mqb in one directory each
// have a route named load, over inputs whose ids overlap. b's route once
// resumed from a's checkpoint and dropped its records as a's repeats,
// exiting 0. Now it refuses to start, naming a.mqb, and writes nothing;
// state reset from b refuses too (it would forget a's state); state
// adopt hands the state to b, after which a is refused. A plan made
// without a file records no owner, and the first plan file to run on
// such state takes it.
func TestStateOwnedByAnotherPlan(t *testing.T) {
	for _, dedup := range []bool{true, false} {
		t.Run(fmt.Sprintf("dedup=%v", dedup), func(t *testing.T) {
			dir := t.TempDir()
			for _, name := range []string{"a", "b"} {
				var lines []string
				for i := range 5 {
					lines = append(lines, fmt.Sprintf(`{"id":%d,"src":%q}`, i, name))
				}
				if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			opts := runtest.Options()
			opts.BaseDir = dir
			ctx := context.Background()
			pa := compileAs(t, "a.mqb", ownedRouteSrc(dir, "a", dedup))
			pb := compileAs(t, "b.mqb", ownedRouteSrc(dir, "b", dedup))

			// A plan made without a file runs first: it records nothing.
			anon := compileAs(t, "a.mqb", ownedRouteSrc(dir, "a", dedup))
			anon.Routes[0].Pos.File = ""
			if _, err := runtime.Run(ctx, anon, opts); err != nil {
				t.Fatal(err)
			}
			// a takes the state over, as state saved before owners were
			// kept is taken over.
			if _, err := runtime.Run(ctx, pa, opts); err != nil {
				t.Fatalf("a.mqb over state without an owner: %v", err)
			}
			if n := runtest.CountRows(t, filepath.Join(dir, "a.db")); n != 5 {
				t.Fatalf("a.db holds %d rows, want 5", n)
			}

			_, err := runtime.Run(ctx, pb, opts)
			var owned *runtime.StateOwnedError
			if !errors.As(err, &owned) || owned.Owner != "a.mqb" || owned.Plan != "b.mqb" {
				t.Fatalf("b.mqb's route load over a.mqb's state: %v, want a refusal naming a.mqb", err)
			}
			for _, want := range []string{"route load of b.mqb", "belongs to the route load of a.mqb", "mqbc state adopt b.mqb load"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal does not say %q:\n%v", want, err)
				}
			}
			if n := runtest.CountRows(t, filepath.Join(dir, "b.db")); n > 0 {
				t.Errorf("the refused route wrote %d rows", n)
			}
			states, err := runtime.RoutesState(ctx, pb, opts)
			if err != nil || len(states) != 1 || states[0].OwnedElsewhere() == nil {
				t.Fatalf("state of b's route: %+v, %v; want it shown as a.mqb's", states, err)
			}
			if _, err := runtime.ResetRouteState(ctx, pb, opts, "load"); err == nil || !strings.Contains(err.Error(), "mqbc state reset a.mqb load") {
				t.Fatalf("reset from b.mqb: %v, want a refusal pointing at a.mqb", err)
			}

			// a.mqb renamed b.mqb: once it adopts the state, it resumes
			// where a stopped.
			renamed := compileAs(t, "b.mqb", ownedRouteSrc(dir, "a", dedup))
			if _, err := runtime.Run(ctx, renamed, opts); !errors.As(err, &owned) {
				t.Fatalf("a.mqb renamed, before adopting: %v, want a refusal", err)
			}
			if _, err := runtime.AdoptRouteState(ctx, renamed, opts, "load"); err != nil {
				t.Fatal(err)
			}
			st, err := runtime.Run(ctx, renamed, opts)
			if err != nil {
				t.Fatalf("b.mqb after adopting: %v", err)
			}
			if rs := st.Route("load"); rs.In != 0 {
				t.Errorf("b.mqb after adopting read %d records, want 0 (resumed at a's position)", rs.In)
			}
			if _, err := runtime.Run(ctx, pa, opts); !errors.As(err, &owned) || owned.Owner != "b.mqb" {
				t.Fatalf("a.mqb after b adopted the state: %v, want a refusal naming b.mqb", err)
			}
		})
	}
}
