package postgrescdc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// cdcEvent is one record a route sent to an eventServer.
type cdcEvent struct {
	id, table, key, op string
	lsn                uint64
	body               string
}

// eventServer is an HTTP endpoint a route's http sink writes records to,
// keeping each as a cdcEvent. While hold is open, the first request waits
// for it to close (first is closed when it arrives), and with it the
// route's sink: the route reads at most a few batches ahead of its sink.
type eventServer struct {
	url   string
	mu    sync.Mutex
	evs   []cdcEvent
	first chan struct{}
	hold  chan struct{}
}

func newEventServer(t *testing.T, hold bool) *eventServer {
	t.Helper()
	es := &eventServer{first: make(chan struct{}), hold: make(chan struct{})}
	if !hold {
		close(es.hold)
	}
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			close(es.first)
			<-es.hold
		})
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		lsn, _ := strconv.ParseUint(r.Header.Get("Mqb-Meta-postgres.lsn"), 10, 64)
		es.mu.Lock()
		es.evs = append(es.evs, cdcEvent{id: r.Header.Get(runtime.HeaderMessageID), table: r.Header.Get("Mqb-Meta-postgres.table"),
			key: r.Header.Get("Mqb-Meta-postgres.key"), op: r.Header.Get("Mqb-Meta-postgres.operation"), lsn: lsn, body: string(body)})
		es.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	es.url = srv.URL
	return es
}

func (es *eventServer) events() []cdcEvent {
	es.mu.Lock()
	defer es.mu.Unlock()
	return slices.Clone(es.evs)
}

// state applies events by key, the one of the highest LSN winning (a
// delete removes the row), as an upsert guarded by postgres.lsn does:
// each table's rows, as "table canonical-JSON", sorted.
func state(t *testing.T, evs []cdcEvent) []string {
	t.Helper()
	last := map[string]cdcEvent{}
	for _, ev := range evs {
		k := ev.table + " " + ev.key
		if cur, ok := last[k]; !ok || ev.lsn > cur.lsn {
			last[k] = ev
		}
	}
	var out []string
	for _, ev := range last {
		if ev.op != "delete" {
			out = append(out, ev.table+" "+canonJSON(t, ev.body))
		}
	}
	sort.Strings(out)
	return out
}

// tableRows is every row of tables as "table canonical-JSON", sorted.
func tableRows(t *testing.T, url string, tables ...string) []string {
	t.Helper()
	var q []string
	for _, tbl := range tables {
		q = append(q, fmt.Sprintf(`SELECT '%s', row_to_json(x)::text FROM %s x`, tbl, tbl))
	}
	return plantest.PGQuery(t, url, strings.Join(q, " UNION ALL "), func(t *testing.T, rows plantest.Rows) []string {
		var out []string
		for rows.Next() {
			var tbl, body string
			if err := rows.Scan(&tbl, &body); err != nil {
				t.Fatal(err)
			}
			out = append(out, tbl+" "+canonJSON(t, body))
		}
		sort.Strings(out)
		return out
	})
}

func exec(t *testing.T, c *pgx.Conn, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := c.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// A table that joins the publication while the snapshot is read (after
// the snapshot listed its tables; the sink is held on its first record so
// the read cannot have ended) is read too, once the others are, in a new
// snapshot taken after it joined: its rows from before it joined, those
// inserted between the listing and the joining included, arrive as
// snapshot rows, its later changes as changes, and the events applied by
// key and LSN give every table's rows. Its name sorts first, so a reader
// that went by name order alone would have passed it.
func TestPostgresCDCSnapshotTableJoinsWhileRead(t *testing.T) {
	url := testsrv.Postgres(t)
	c := snapshotDB(t, url, snapOrders)
	exec(t, c, `CREATE TABLE aaa_late (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`,
		`INSERT INTO aaa_late SELECT g, 'before the snapshot ' || g FROM generate_series(1, 200) g`)
	es := newEventServer(t, true)
	e := plantest.NewEnv(t)
	p := plantest.Compile(t, fmt.Sprintf("route snap {\n  batch_size = 50\n  %s\n  to http { url = %q }\n}\n",
		snapshotSource(url, "mqb_late_slot", e.State), es.url))
	r := runtest.Start(context.Background(), p, runtest.Options())
	select {
	case <-es.first:
	case <-time.After(time.Minute):
		close(es.hold)
		t.Fatal("no record reached the sink")
	}
	exec(t, c, `INSERT INTO aaa_late SELECT g, 'after the listing ' || g FROM generate_series(201, 300) g`,
		`ALTER PUBLICATION mqb_pub ADD TABLE aaa_late`,
		`INSERT INTO aaa_late SELECT g, 'after joining ' || g FROM generate_series(301, 400) g`,
		`UPDATE aaa_late SET v = 'updated' WHERE id IN (1, 250)`,
		`DELETE FROM aaa_late WHERE id IN (2, 251)`)
	close(es.hold)
	want := tableRows(t, url, "orders", "lines", "aaa_late")
	converged := runtest.WaitFor(func() bool { return slices.Equal(state(t, es.events()), want) }, 2*time.Minute, 100*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	rs := r.Stop(t).Route("snap")
	runtest.CheckCounts(t, rs)
	evs := es.events()
	if got := state(t, evs); !converged {
		t.Errorf("events applied by key and LSN give %d rows, the tables hold %d: %s", len(got), len(want), firstDiff(got, want))
	}
	ids := map[string]bool{}
	snapLate := map[string]bool{}
	for _, ev := range evs {
		if ids[ev.id] {
			t.Errorf("message_id %s (%s %s %s) delivered twice", ev.id, ev.op, ev.table, ev.key)
		}
		ids[ev.id] = true
		if ev.table == "aaa_late" && ev.op == opSnapshot {
			snapLate[ev.key] = true
		}
	}
	for id := 3; id <= 300; id++ {
		if id != 251 && !snapLate[strconv.Itoa(id)] {
			t.Errorf("aaa_late row %d, there before the table joined, is no snapshot row", id)
			break
		}
	}
}

// The snapshot is read in the slot's exported snapshot only when every
// table it lists was in the publication as that snapshot sees it; a table
// that joined after the slot's start (a row inserted before it joined is
// neither in the exported snapshot nor streamed) makes it read every
// table in a new snapshot, which holds that row.
func TestPostgresCDCSnapshotJoinedAfterSlotStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		join   bool
		late   []string
		seesB2 bool
	}{
		{"nothing joined: the exported snapshot", false, nil, false},
		{"b joined after the slot's start: a new snapshot", true, []string{"public.b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := testsrv.Postgres(t)
			ctx := context.Background()
			c, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			exec(t, c, `CREATE TABLE a (id INTEGER PRIMARY KEY)`, `CREATE TABLE b (id INTEGER PRIMARY KEY)`,
				`INSERT INTO b VALUES (1)`, `CREATE PUBLICATION p FOR TABLE a`)
			if !tc.join {
				exec(t, c, `ALTER PUBLICATION p ADD TABLE b`)
			}
			repl, err := pgconn.Connect(ctx, url+"&replication=database")
			if err != nil {
				t.Fatal(err)
			}
			defer repl.Close(ctx)
			slot, err := pglogrepl.CreateReplicationSlot(ctx, repl, "late_slot", "pgoutput",
				pglogrepl.CreateReplicationSlotOptions{Temporary: true, Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
			if err != nil {
				t.Fatal(err)
			}
			exec(t, c, `INSERT INTO b VALUES (2)`) // after the slot's start
			if tc.join {
				exec(t, c, `ALTER PUBLICATION p ADD TABLE b`)
			}
			sc, err := pgconn.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close(ctx)
			st := &snapshotState{conn: sc}
			late, err := st.begin(ctx, slot.SnapshotName, "p")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(late, tc.late) {
				t.Errorf("late %v, want %v", late, tc.late)
			}
			if !slices.Equal(st.names, []string{"public.a", "public.b"}) {
				t.Errorf("tables %v, want public.a and public.b", st.names)
			}
			res := sc.Exec(ctx, `SELECT count(*) FROM b WHERE id = 2`)
			rows, err := res.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if sees := string(rows[0].Rows[0][0]) == "1"; sees != tc.seesB2 {
				t.Errorf("the snapshot's transaction sees b's row 2 (inserted after the slot's start): %v, want %v", sees, tc.seesB2)
			}
		})
	}
}

// A stored generated column comes the same way in the snapshot's rows and
// in the changes: pgoutput before PostgreSQL 18 sends none, so neither
// carries it; and a publication's column list gives the snapshot's rows
// the columns the changes carry, no others.
func TestPostgresCDCSnapshotGeneratedColumns(t *testing.T) {
	url := testsrv.Postgres(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var version int
	if err := c.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	exec(t, c, `CREATE TABLE gen (id INTEGER PRIMARY KEY, x INTEGER NOT NULL, doubled INTEGER GENERATED ALWAYS AS (x * 2) STORED)`,
		`CREATE TABLE narrow (id INTEGER PRIMARY KEY, a TEXT, secret TEXT)`,
		`CREATE PUBLICATION mqb_pub FOR TABLE gen, narrow (id, a)`,
		`INSERT INTO gen (id, x) SELECT g, g FROM generate_series(1, 50) g`,
		`INSERT INTO narrow SELECT g, 'a' || g, 's' || g FROM generate_series(1, 50) g`)
	es := newEventServer(t, false)
	e := plantest.NewEnv(t)
	p := plantest.Compile(t, fmt.Sprintf("route snap {\n  %s\n  to http { url = %q }\n}\n", snapshotSource(url, "mqb_gen_slot", e.State), es.url))
	r := runtest.Start(context.Background(), p, runtest.Options())
	if !runtest.WaitFor(func() bool { return len(es.events()) >= 100 }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("%d snapshot rows, want 100", len(es.events()))
	}
	exec(t, c, `INSERT INTO gen (id, x) VALUES (51, 51)`, `UPDATE gen SET x = 100 WHERE id = 1`,
		`INSERT INTO narrow VALUES (51, 'a51', 's51')`, `UPDATE narrow SET a = 'changed', secret = 'changed' WHERE id = 1`)
	if !runtest.WaitFor(func() bool { return len(es.events()) >= 104 }, time.Minute, 20*time.Millisecond) {
		t.Fatalf("%d records, want 104", len(es.events()))
	}
	runtest.CheckCounts(t, r.Stop(t).Route("snap"))
	want := map[string]string{"gen": "id,x", "narrow": "a,id"}
	if version >= 180000 {
		t.Logf("PostgreSQL %d: generated columns are published only WITH (publish_generated_columns = stored)", version)
	}
	seen := map[string]bool{}
	for _, ev := range es.events() {
		var row map[string]any
		if err := json.Unmarshal([]byte(ev.body), &row); err != nil {
			t.Fatal(err)
		}
		var cols []string
		for k := range row {
			cols = append(cols, k)
		}
		sort.Strings(cols)
		if got := strings.Join(cols, ","); got != want[ev.table] {
			t.Errorf("%s %s %s has columns %s, want %s", ev.op, ev.table, ev.key, got, want[ev.table])
		}
		seen[ev.table+" "+ev.op] = true
	}
	for _, k := range []string{"gen snapshot", "gen insert", "gen update", "narrow snapshot", "narrow insert", "narrow update"} {
		if !seen[k] {
			t.Errorf("no %s record", k)
		}
	}
}
