package sql

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mqbc "github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/plan"
)

// TestCrashSQLiteUpsertVerdicts checks the compiler's DO UPDATE verdicts
// against what SIGKILLs do to a real run (issue 12, item 2). An
// accumulating update (qty = t.qty + excluded.qty) must not be called
// effectively-once, and a replay must indeed change its rows; a convergent
// one (qty = excluded.qty) is called effectively-once and must end, after
// kills and a replay of everything, with exactly the rows of a clean run.
func TestCrashSQLiteUpsertVerdicts(t *testing.T) {
	bin := buildCrashHelper(t)
	tests := []struct {
		name, set string
		want      string // the compiler's verdict
	}{
		{"accumulate", "qty = t.qty + excluded.qty", plan.AtLeastOnce},
		{"converge", "qty = excluded.qty", plan.EffectivelyOnce},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			input := filepath.Join(dir, "stock.jsonl")
			sum, last := genStock(t, input, 100000, 31)
			db := filepath.Join(dir, "stock.db")
			src := fmt.Sprintf(`route stock {
  from file { path = %q, checkpoint_store = %q }
  to sql {
    url = %q
    create_table = "CREATE TABLE IF NOT EXISTS stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL)"
    insert_query = "INSERT INTO stock AS t (sku, qty) VALUES (${payload.sku}, ${payload.qty}) ON CONFLICT (sku) DO UPDATE SET %s"
  }
}
`, input, "pebble://"+filepath.Join(dir, "state"), "sqlite://"+db, tt.set)
			p, diags := mqbc.CompileSources([]mqbc.Source{{Name: "stock.mqb", Src: []byte(src)}})
			if diags.HasErrors() {
				t.Fatalf("compile: %v", diags)
			}
			r := p.Routes[0]
			if r.Guarantee != tt.want {
				t.Fatalf("verdict %s, want %s: %s", r.Guarantee, tt.want, strings.Join(r.Reasons, "; "))
			}
			t.Logf("verdict: %s", mqbc.VerdictLine(r))
			p.Routes[0].BatchSize = 64

			clean := sum
			if tt.name == "converge" {
				clean = last
			}
			planPath := writeCrashPlan(t, *p, dir)
			killRuns(t, bin, planPath, crashSchedule{Kills: 3, Wait: killWaits(31, 7, 250*time.Millisecond, 700*time.Millisecond), MayEnd: true})
			finishRun(t, startHelper(t, bin, planPath))
			afterKills := sqliteMap[int64](t, db, "SELECT sku, qty FROM stock")
			t.Logf("after kills: %d rows, %d differ from a clean run", len(afterKills), differing(afterKills, clean))

			// A crash between the sink's commit and the position's is a
			// replay of what was written: lose the position and run again.
			if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
				t.Fatal(err)
			}
			finishRun(t, startHelper(t, bin, planPath))
			got := sqliteMap[int64](t, db, "SELECT sku, qty FROM stock")
			n := differing(got, clean)
			switch tt.want {
			case plan.EffectivelyOnce:
				if n != 0 || len(got) != len(clean) {
					t.Errorf("effectively-once route ends with %d rows, %d of them differing from a clean run's %d", len(got), n, len(clean))
				}
			default:
				if n == 0 {
					t.Errorf("the accumulating update survived a replay unchanged: the test no longer shows why it is not effectively-once")
				}
			}
		})
	}
}

// genStock writes n stock lines over 500 skus and returns what a clean run
// leaves: the sum of each sku's quantities, and its last quantity.
func genStock(t *testing.T, path string, n int, seed uint64) (sum, last map[string]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	sum, last = map[string]int64{}, map[string]int64{}
	var b strings.Builder
	for range n {
		sku := fmt.Sprintf("sku-%03d", rng.IntN(500))
		qty := int64(1 + rng.IntN(9))
		sum[sku] += qty
		last[sku] = qty
		fmt.Fprintf(&b, "{\"sku\":%q,\"qty\":%d}\n", sku, qty)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return sum, last
}

func differing(got, want map[string]int64) int {
	n := 0
	for k, v := range want {
		if got[k] != v {
			n++
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			n++
		}
	}
	return n
}
