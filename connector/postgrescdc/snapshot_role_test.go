package postgrescdc

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// replicationRole creates a role as PostgreSQL's docs have logical
// replication run: LOGIN REPLICATION, no superuser, SELECT on the
// published tables (granted by the caller), and returns url with that
// role as its user. The server trusts local connections, so no password.
// The role is dropped when the test ends.
func replicationRole(t *testing.T, c *pgx.Conn, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	// Roles belong to the cluster the tests share: name it after the
	// test's own database.
	role := "r_" + strings.TrimPrefix(u.Path, "/")
	if len(role) > 63 {
		role = role[:63]
	}
	ctx := context.Background()
	if _, err := c.Exec(ctx, `CREATE ROLE `+quoteIdent(role)+` LOGIN REPLICATION NOSUPERUSER`); err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: this one before the database is dropped,
	// so the privileges it holds there can be dropped with it.
	t.Cleanup(func() {
		ctx := context.Background()
		c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, role)
		if _, err := c.Exec(ctx, `DROP OWNED BY `+quoteIdent(role)); err != nil {
			t.Logf("drop owned by %s: %v", role, err)
		}
		if _, err := c.Exec(ctx, `DROP ROLE `+quoteIdent(role)); err != nil {
			t.Logf("drop role %s: %v", role, err)
		}
	})
	u.User = url.User(role)
	return u.String()
}

// A snapshot route runs as an ordinary replication role, not only as a
// superuser: the catalog queries listing the published tables, their keys
// and columns (and the primary_key premise, checked with them) read only
// what such a role may, and every row arrives once. A table without a
// key is still refused by the premise, under that role too.
func TestPostgresCDCSnapshotAsReplicationRole(t *testing.T) {
	dbURL := testsrv.Postgres(t)
	const orders = 400
	c := snapshotDB(t, dbURL, orders)
	ctx := context.Background()
	roleURL := replicationRole(t, c, dbURL)
	role, _ := url.Parse(roleURL)
	if _, err := c.Exec(ctx, `GRANT SELECT ON orders, lines TO `+quoteIdent(role.User.Username())); err != nil {
		t.Fatal(err)
	}
	var super bool
	if err := c.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = $1`, role.User.Username()).Scan(&super); err != nil || super {
		t.Fatalf("role is superuser %v (%v)", super, err)
	}
	want := sourceRows(t, dbURL)

	e := plantest.NewEnv(t)
	db := filepath.Join(e.Dir, "ev.db")
	p := plantest.Compile(t, fmt.Sprintf(`route snap {
  %s
  to sql {
    url          = %q
    create_table = "CREATE TABLE IF NOT EXISTS ev (id TEXT NOT NULL, tbl TEXT NOT NULL, op TEXT NOT NULL, body TEXT NOT NULL)"
    insert_query = "INSERT INTO ev (id, tbl, op, body) VALUES (${message_id}, ${meta[\"postgres.table\"]}, ${meta[\"postgres.operation\"]}, ${payload})"
  }
}
`, snapshotSource(roleURL, "mqb_role_slot", e.State), "sqlite://"+db))
	rs := runtest.RunUntil(t, p, runtest.Options(), 2*time.Minute, func() bool {
		return sqliteCount(t, db, `SELECT count(*) FROM ev`) >= len(want)
	}).Route("snap")
	runtest.CheckCounts(t, rs)
	if rs.DeadLettered+rs.Errors != 0 {
		t.Errorf("run: %+v", rs)
	}
	evs := sqliteQuery(t, db, `SELECT id, tbl, op, body FROM ev`)
	ids := map[string]int{}
	var got []string
	for _, ev := range evs {
		ids[ev[0]]++
		if ev[2] != opSnapshot {
			t.Errorf("a %s record, want only snapshot rows", ev[2])
		}
		got = append(got, ev[1]+" "+canonJSON(t, ev[3]))
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("message_id %s delivered %d times", id, n)
		}
	}
	if len(evs) != len(want) || len(ids) != len(want) {
		t.Errorf("%d records (%d ids), want the %d rows once each", len(evs), len(ids), len(want))
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the records are not the tables' rows")
	}

	// A published table without a key: the premise, checked as the
	// role, names it.
	for _, q := range []string{`CREATE TABLE notes (body TEXT)`, `ALTER PUBLICATION mqb_pub ADD TABLE notes`,
		`GRANT SELECT ON notes TO ` + quoteIdent(role.User.Username())} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	e2 := plantest.NewEnv(t)
	p2 := plantest.Compile(t, fmt.Sprintf("route snap {\n  %s\n  to file { path = %q }\n}\n", snapshotSource(roleURL, "mqb_role_nokey_slot", e2.State), filepath.Join(e2.Dir, "out.jsonl")))
	_, err := runtime.Run(ctx, p2, runtest.Options())
	if err == nil || !strings.Contains(err.Error(), "public.notes has no primary key") || !strings.Contains(err.Error(), "premise not met") {
		t.Fatalf("err %v, want the premise to name public.notes as without a primary key", err)
	}
}
