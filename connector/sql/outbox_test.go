package sql

import (
	"fmt"
	"slices"
	"strings"
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

// The outbox row is the position of one source read into one sink: a
// second pipeline whose route has the same name but reads another table
// of the same database (or writes elsewhere) must not resume from the
// first one's row. Keyed by the route name alone, it did: the second
// pipeline, with a checkpoint store of its own, started past every row
// the first had copied and never read them.
func TestSQLOutboxRowIsTheSourcesOwn(t *testing.T) {
	for i, newDB := range cursorDBs() {
		t.Run([]string{"postgres", "mariadb"}[i], func(t *testing.T) {
			db := newDB(t)
			db.exec(db.srcDDL)
			insertSrcRows(db, 0, 2000)
			db.exec(`CREATE TABLE src2 AS SELECT * FROM src`)
			db.exec(`CREATE TABLE plain (id BIGINT NOT NULL, amount INTEGER, body TEXT)`)
			db.exec(`CREATE TABLE plain2 (id BIGINT NOT NULL, amount INTEGER, body TEXT)`)
			outboxPlan := func(src, dst string) plan.Plan {
				p := cursorPlan(newTestEnv(t), db, map[string]plan.Value{"table": strV(src), "cursor_column": strV("id")})
				r := &p.Routes[0]
				r.Concurrency = 1
				r.Nodes[len(r.Nodes)-1].Attrs = map[string]plan.Value{"url": strV(db.url),
					"insert_query": tmplV(lit("INSERT INTO "+dst+" (id, amount, body) VALUES ("), ex("payload.id"), lit(", "),
						ex("payload.amount"), lit(", "), ex("payload.body"), lit(")"))}
				return p
			}
			runCursorUntil(t, outboxPlan("src", "plain"), func() bool { return db.count("plain") == 2000 })
			runCursorUntil(t, outboxPlan("src2", "plain2"), func() bool { return db.count("plain2") == 2000 })
			if got := db.count("mqb_outbox"); got != 2 {
				t.Errorf("mqb_outbox has %d rows, want one per source and sink", got)
			}
		})
	}
}

// The outbox's exactly-once rests on the sink's table rolling back with
// the position: a MyISAM table kept the rows of a batch whose transaction
// a SIGKILL cut short, the position rolled back, and the replay inserted
// them again (7680 of 120000 rows twice under five kills, plain INSERT,
// verdict exactly-once). The compiled route carries the premise, and the
// check refuses every table but an allow-listed kind before the first
// record.
func TestSQLOutboxTransactionalTable(t *testing.T) {
	cases := []struct {
		db, name, ddl string
		ok            bool
		found         string
	}{
		{db: "mariadb", name: "InnoDB", ddl: "CREATE TABLE plain (id BIGINT NOT NULL, body TEXT) ENGINE=InnoDB", ok: true},
		{db: "mariadb", name: "MyISAM", ddl: "CREATE TABLE plain (id BIGINT NOT NULL, body TEXT) ENGINE=MyISAM", found: "MyISAM"},
		{db: "mariadb", name: "Aria", ddl: "CREATE TABLE plain (id BIGINT NOT NULL, body TEXT) ENGINE=Aria", found: "Aria"},
		{db: "mariadb", name: "missing", found: "does not exist"},
		{db: "postgres", name: "table", ddl: "CREATE TABLE plain (id BIGINT NOT NULL, body TEXT)", ok: true},
		{db: "postgres", name: "view", ddl: "CREATE TABLE base (id BIGINT NOT NULL, body TEXT); CREATE VIEW plain AS SELECT * FROM base", found: "a view"},
	}
	dbs := map[string]func(t *testing.T) cursorDB{"postgres": cursorDBs()[0], "mariadb": cursorDBs()[1]}
	for _, c := range cases {
		t.Run(c.db+"/"+c.name, func(t *testing.T) {
			db := dbs[c.db](t)
			db.exec(db.srcDDL)
			for _, stmt := range strings.Split(c.ddl, ";") {
				if strings.TrimSpace(stmt) != "" {
					db.exec(stmt)
				}
			}
			p := compileMQB(t, fmt.Sprintf(`
route r {
  from sql { url = %q, table = "src", cursor_column = "id" }
  to sql {
    url          = %[1]q
    insert_query = "INSERT INTO plain (id, body) VALUES (${payload.id}, ${payload.body})"
  }
}`, db.url))
			if g := p.Routes[0].Guarantee; g != plan.ExactlyOnce {
				t.Fatalf("verdict %s, want exactly-once given the premise: %v", g, p.Routes[0].Reasons)
			}
			if !slices.ContainsFunc(p.Routes[0].Premises, func(pr plan.Premise) bool {
				return pr.Kind == plan.PremiseTransactionalTable && pr.Target == "plain" && pr.When == plan.CheckStartup
			}) {
				t.Fatalf("premises %+v, want table plain transactional, checked at start-up", p.Routes[0].Premises)
			}
			opts := testOptions(t)
			opts.StateDir = t.TempDir()
			res := checkOneKind(t, p, opts, plan.PremiseTransactionalTable, c.ok)
			if !c.ok && !strings.Contains(res.Err.Error(), c.found) {
				t.Errorf("the refusal does not say %q: %v", c.found, res.Err)
			}
		})
	}
}
