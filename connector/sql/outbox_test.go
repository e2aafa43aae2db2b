package sql

import (
	"fmt"
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
			planPath := writeCrashPlan(t, p, e.dir)
			killRuns(t, bin, planPath, crashSchedule{Kills: 5, Wait: killWaits(uint64(i), 3, 300*time.Millisecond, 600*time.Millisecond), MayEnd: true,
				Progress: func() string { return fmt.Sprintf("(%d rows written)", db.count("plain")) }})
			final := startHelper(t, bin, planPath)
			waitFor(func() bool { return db.count("plain") >= n }, time.Minute, 50*time.Millisecond)
			time.Sleep(300 * time.Millisecond)
			st := stopRun(t, final)
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
