package runtime

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/plan"
)

// The transactional outbox: a cursor source and a plain INSERT (no unique
// key, no conflict clause) into the same database, the process SIGKILLed at
// random moments and restarted: every source row is in the target exactly
// once, because each batch's rows and the position past them commit in one
// transaction.
func TestCrashSQLOutboxExactlyOnce(t *testing.T) {
	bin := buildCrashHelper(t)
	for i, newDB := range cursorDBs() {
		t.Run([]string{"postgres", "mariadb"}[i], func(t *testing.T) {
			db := newDB(t)
			db.exec(db.srcDDL)
			db.exec(`CREATE TABLE plain (id BIGINT NOT NULL, amount INTEGER, body TEXT)`)
			const n = 120000
			insertSrcRows(db, 0, n)
			e := newTestEnv(t)
			p := cursorPlan(e, db, map[string]plan.Value{"table": strV("src"), "cursor_column": strV("id")})
			r := &p.Routes[0]
			r.Concurrency, r.BatchSize = 1, 256
			sink := &r.Nodes[len(r.Nodes)-1]
			sink.Attrs = map[string]plan.Value{"url": strV(db.url),
				"insert_query": tmplV(lit("INSERT INTO plain (id, amount, body) VALUES ("), ex("payload.id"), lit(", "),
					ex("payload.amount"), lit(", "), ex("payload.body"), lit(")"))}
			planPath := filepath.Join(e.dir, "plan.json")
			data, _ := json.Marshal(p)
			if err := os.WriteFile(planPath, data, 0o644); err != nil {
				t.Fatal(err)
			}
			start := func() (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
				var stdout, stderr bytes.Buffer
				cmd := exec.Command(bin, "-plan", planPath)
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				return cmd, &stdout, &stderr
			}
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			for k := 0; k < 5; k++ {
				cmd, _, stderr := start()
				wait := time.Duration(300+rng.IntN(600)) * time.Millisecond
				time.Sleep(wait)
				cmd.Process.Signal(syscall.SIGKILL)
				cmd.Wait()
				t.Logf("run %d killed after %v with %d rows written %s", k, wait, db.count("plain"), stderr.String())
			}
			cmd, stdout, stderr := start()
			deadline := time.Now().Add(time.Minute)
			for db.count("plain") < n && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("final run: %v\n%s", err, stderr.String())
			}
			var st Stats
			json.Unmarshal(stdout.Bytes(), &st)
			t.Logf("final run: %+v", st.Route("cursor"))
			if got, distinct := db.count("plain"), db.count("(SELECT DISTINCT id FROM plain) d"); got != n || distinct != n {
				t.Errorf("target holds %d rows, %d distinct ids; want %d once each", got, distinct, n)
			}
			if got := db.count("mqb_outbox"); got != 1 {
				t.Errorf("mqb_outbox has %d rows, want the route's one", got)
			}
		})
	}
}
