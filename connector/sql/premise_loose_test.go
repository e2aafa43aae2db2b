package sql

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime"
)

// TestLooseUniqueKeyWarns: a unique index that compares its key more
// loosely than byte for byte (a case-insensitive collation, a prefix of
// the value, citext) makes two records whose keys differ only in case one
// row. That is what a run without a crash does too, so the premise holds
// and the route runs, but the start says so, naming the index, the
// columns and the fix. An exact key (the default collation of SQLite and
// PostgreSQL, a _bin collation, an integer) says nothing, and keeps both.
func TestLooseUniqueKeyWarns(t *testing.T) {
	pg := testsrv.Postgres(t)
	my := testsrv.MariaDBDatabase(t)
	for _, tc := range []struct {
		name, url, create, conflict string
		loose                       string // what the warning names; "" for none
	}{
		{"sqlite binary", "sqlite://out.db", "CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, body TEXT)", "ON CONFLICT (id) DO NOTHING", ""},
		{"sqlite nocase pk", "sqlite://out2.db", "CREATE TABLE IF NOT EXISTS t (id TEXT COLLATE NOCASE PRIMARY KEY, body TEXT)", "ON CONFLICT (id) DO NOTHING", "id (collation NOCASE)"},
		{"sqlite nocase unique", "sqlite://out3.db", "CREATE TABLE IF NOT EXISTS t (rid INTEGER PRIMARY KEY, id TEXT, body TEXT, UNIQUE (id COLLATE NOCASE))", "ON CONFLICT (id) DO NOTHING", "id (collation NOCASE)"},
		{"postgres text", pg, "CREATE TABLE IF NOT EXISTS loose_text (id TEXT PRIMARY KEY, body TEXT)", "ON CONFLICT (id) DO NOTHING", ""},
		{"postgres citext", pg, "CREATE EXTENSION IF NOT EXISTS citext; CREATE TABLE IF NOT EXISTS loose_citext (id citext PRIMARY KEY, body TEXT)", "ON CONFLICT (id) DO NOTHING", "id (citext or a nondeterministic collation)"},
		{"mariadb default collation", my.URL, "CREATE TABLE IF NOT EXISTS loose_ci (id VARCHAR(64) PRIMARY KEY, body TEXT)", "ON DUPLICATE KEY UPDATE body = VALUES(body)", "id (collation "},
		{"mariadb binary collation", my.URL, "CREATE TABLE IF NOT EXISTS loose_bin (id VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, body TEXT)", "ON DUPLICATE KEY UPDATE body = VALUES(body)", ""},
		{"mariadb prefix", my.URL, "CREATE TABLE IF NOT EXISTS loose_prefix (id VARCHAR(64) COLLATE utf8mb4_bin, body TEXT, UNIQUE KEY (id(2)))", "ON DUPLICATE KEY UPDATE body = VALUES(body)", "id (only its first 2 characters)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"id":"Ab1","body":"first"}`+"\n"+`{"id":"ab1","body":"second"}`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			table := strings.Fields(strings.SplitN(tc.create, "EXISTS ", 3)[len(strings.SplitN(tc.create, "EXISTS ", 3))-1])[0]
			p := compileMQB(t, fmt.Sprintf(`route r {
  from file { path = "in.jsonl" }
  to sql {
    url          = %q
    create_table = %q
    insert_query = "INSERT INTO %s (id, body) VALUES (${payload.id}, ${payload.body}) %s"
  }
}`, tc.url, tc.create, table, tc.conflict))
			var logs syncBuffer
			opts := runtime.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})), BaseDir: dir, StateDir: filepath.Join(dir, "state")}
			st, err := runtime.Run(context.Background(), p, opts)
			if err != nil {
				t.Fatal(err)
			}
			if rs := st.Route("r"); rs.In != 2 {
				t.Errorf("stats %+v: want in 2", rs)
			}
			warned := strings.Contains(logs.String(), "more loosely than byte for byte")
			switch {
			case tc.loose == "" && warned:
				t.Errorf("an exact key warned:\n%s", logs.String())
			case tc.loose != "" && (!warned || !strings.Contains(logs.String(), tc.loose)):
				t.Errorf("want a warning naming %q:\n%s", tc.loose, logs.String())
			}
		})
	}
}
