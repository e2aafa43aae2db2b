package main

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/mqb-dev/mqb/internal/testsrv"
)

// Server sinks: sql sinks on PostgreSQL and MariaDB besides SQLite. The
// prover reads a sink's conflict handling per dialect (ON CONFLICT with
// excluded.col on PostgreSQL; INSERT IGNORE, ON DUPLICATE KEY UPDATE with
// VALUES(col) and REPLACE on MariaDB), and these are the forms users
// write; the generator writes each SQLite sink it draws and then, for a
// case that draws server sinks, translates some of them to one of the
// servers' dialects, with forms of that dialect drawn from a stream of
// the case's own (srv), so a seed that does not draw them keeps its
// routes exactly as before.
//
// A route's url names its server by a placeholder (pgPlaceholder,
// mariaPlaceholder) that each run directory replaces with a database of
// its own, created when the directory is prepared and dropped when the
// case ends; tables are read back from there.

const (
	pgPlaceholder    = "@POSTGRES@"
	mariaPlaceholder = "@MARIADB@"
)

// serverSinks turns the server sinks on (the -server-sinks flag, and
// TestServerSinks); off, no seed draws them.
var serverSinks bool

// pickServerSinks gives the case its stream of server-sink draws when they
// are on. CI's fixed seeds (1 to 10) stay as they were.
func pickServerSinks(c *Case) {
	if !serverSinks || c.Seed <= 10 {
		return
	}
	c.srv = rand.New(rand.NewPCG(c.Seed, 0x5e75))
	c.dsrv = rand.New(rand.NewPCG(c.Seed, 0xd5e7))
}

// dedupServer draws where one dedup step keeps its keys: "" (as
// generated, Pebble) or a server's placeholder, a dedup store shared
// through a table (runtime/dedup/sql.go). A killed run leaves its
// reservations there for its restart to find held by another instance
// until they expire.
func (c *Case) dedupServer() string {
	if c.dsrv == nil {
		return ""
	}
	switch r := c.dsrv.IntN(100); {
	case r < 30:
		return pgPlaceholder
	case r < 50:
		return mariaPlaceholder
	}
	return ""
}

// serverDialect draws the dialect of one sql sink: "" (SQLite, as
// generated), "postgres" or "mariadb".
func (c *Case) serverDialect() string {
	if c.srv == nil {
		return ""
	}
	switch r := c.srv.IntN(100); {
	case r < 35:
		return "postgres"
	case r < 70:
		return "mariadb"
	}
	return ""
}

// sqlLeafText is what sqlLeaf drew for one sink, in SQLite's dialect.
type sqlLeafText struct {
	ddl, verb, conflict, table string
	cols, vals                 []string
	secondRow                  []string // a second VALUES row, or nil
	keyed                      bool
}

// translate rewrites a SQLite sink for dialect d: its DDL and its insert
// query.
func (s sqlLeafText) translate(d string, srv *rand.Rand) (ddl, query string) {
	vals := dialectValues(s.vals, d)
	var second []string
	if s.secondRow != nil {
		second = dialectValues(s.secondRow, d)
	}
	rows := "(" + strings.Join(vals, ", ") + ")"
	if second != nil {
		rows += ", (" + strings.Join(second, ", ") + ")"
	}
	cols := strings.Join(s.cols, ", ")
	switch d {
	case "postgres":
		ddl = strings.NewReplacer(
			"rid INTEGER PRIMARY KEY AUTOINCREMENT", "rid BIGSERIAL PRIMARY KEY",
			"INTEGER", "BIGINT").Replace(s.ddl)
		verb, conflict := s.verb, s.conflict
		switch verb {
		case "INSERT OR IGNORE INTO":
			verb, conflict = "INSERT INTO", "ON CONFLICT DO NOTHING"
		case "INSERT OR REPLACE INTO":
			verb = "INSERT INTO"
			var sets []string
			for _, c := range s.cols[1:] {
				sets = append(sets, fmt.Sprintf("%s = EXCLUDED.%s", c, c))
			}
			conflict = "ON CONFLICT (id) DO UPDATE SET " + strings.Join(sets, ", ")
		}
		if conflict == "ON CONFLICT (id) DO NOTHING" && s.keyed && srv.IntN(100) < 25 {
			// The constraint by name: PRIMARY KEY is t_pkey, UNIQUE t_id_key.
			name := s.table + "_pkey"
			if strings.Contains(s.ddl, "UNIQUE") {
				name = s.table + "_id_key"
			}
			conflict = "ON CONFLICT ON CONSTRAINT " + name + " DO NOTHING"
		}
		query = fmt.Sprintf("%s %s (%s) VALUES %s", verb, s.table, cols, rows)
		if conflict != "" {
			query += " " + conflict
		}
	case "mariadb":
		ddl = strings.NewReplacer(
			"rid INTEGER PRIMARY KEY AUTOINCREMENT", "rid BIGINT AUTO_INCREMENT PRIMARY KEY",
			"id TEXT PRIMARY KEY", "id VARCHAR(191) PRIMARY KEY",
			"id TEXT UNIQUE", "id VARCHAR(191) UNIQUE",
			"INTEGER", "BIGINT").Replace(s.ddl)
		verb, tail := s.verb, ""
		switch c := s.conflict; {
		case c == "":
			switch verb {
			case "INSERT OR IGNORE INTO":
				verb = "INSERT IGNORE INTO"
			case "INSERT OR REPLACE INTO":
				verb = "REPLACE INTO"
			}
		case strings.HasSuffix(c, "DO NOTHING"):
			if s.keyed && srv.IntN(100) < 30 {
				// The no-op update idiom.
				verb, tail = "INSERT INTO", "ON DUPLICATE KEY UPDATE id = id"
			} else {
				verb = "INSERT IGNORE INTO"
			}
		case strings.Contains(c, "WHERE excluded.qty >"):
			tail = "ON DUPLICATE KEY UPDATE qty = IF(VALUES(qty) > qty, VALUES(qty), qty)"
		case strings.Contains(c, "+ excluded.qty"):
			tail = "ON DUPLICATE KEY UPDATE qty = qty + VALUES(qty)"
		case strings.HasPrefix(c, "ON CONFLICT (id) DO UPDATE SET "):
			sets := strings.TrimPrefix(c, "ON CONFLICT (id) DO UPDATE SET ")
			tail = "ON DUPLICATE KEY UPDATE " + excludedRE.ReplaceAllString(sets, "VALUES($1)")
		default:
			panic("translate: unknown conflict " + c)
		}
		query = fmt.Sprintf("%s %s (%s) VALUES %s", verb, s.table, cols, rows)
		if tail != "" {
			query += " " + tail
		}
	default:
		panic("translate: unknown dialect " + d)
	}
	return ddl, query
}

var excludedRE = regexp.MustCompile(`excluded\.([a-z]+)`)

// dialectValues rewrites each VALUES expression for dialect d: SQLite functions
// to theirs, and, on PostgreSQL, a parameter an overloaded function takes
// cast to the type it stands for (PostgreSQL cannot tell abs(unknown)).
func dialectValues(vals []string, d string) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		switch d {
		case "postgres":
			v = strings.NewReplacer(
				"hex(randomblob(8))", "md5(random()::text)",
				"abs(${payload.qty})", "abs(${payload.qty}::bigint)",
				"lower(${payload.id})", "lower(${payload.id}::text)",
				"upper(${payload.body})", "upper(${payload.body}::text)",
			).Replace(v)
		case "mariadb":
			v = strings.NewReplacer("hex(randomblob(8))", "uuid()", "random()", "rand()").Replace(v)
		}
		out[i] = v
	}
	return out
}

// serverDBs are the databases each run directory's placeholders stand
// for: placeholder → URL (as the route's url) and how to open it here.
var serverDBs = struct {
	sync.Mutex
	m map[string]map[string]serverDB
}{m: map[string]map[string]serverDB{}}

type serverDB struct {
	url, driver, dsn string
	drop             func()
}

// openServerDBs creates a database for each placeholder source uses, for
// run directory dir, and returns source with the placeholders replaced.
func openServerDBs(dir, source string, setup []SetupSQL) (string, error) {
	dbs := map[string]serverDB{}
	for _, ph := range []string{pgPlaceholder, mariaPlaceholder, chPlaceholder} {
		if !strings.Contains(source, ph) {
			continue
		}
		var db testsrv.Database
		var driver string
		drop, err := withTB("a database for the "+ph+" sinks", func(tb *harnessTB) {
			pgMu.Lock()
			defer pgMu.Unlock()
			switch ph {
			case pgPlaceholder:
				db, driver = testsrv.SharedPostgres(tb).NewDatabase(tb), "pgx"
			case chPlaceholder:
				db, driver = newClickHouseDB(tb)
			default:
				db, driver = testsrv.SharedMariaDB(tb).NewDatabase(tb), "mysql"
			}
		})
		if err != nil {
			closeServerDBs(dir)
			return "", err
		}
		dbs[ph] = serverDB{url: db.URL, driver: driver, dsn: db.DSN, drop: drop}
		source = strings.ReplaceAll(source, ph, db.URL)
		serverDBs.Lock()
		serverDBs.m[dir] = dbs
		serverDBs.Unlock()
	}
	source, err := openMongoSinkDB(dbs, source)
	serverDBs.Lock()
	serverDBs.m[dir] = dbs
	serverDBs.Unlock()
	if err != nil {
		closeServerDBs(dir)
		return "", err
	}
	for _, s := range setup {
		db, ok := dbs[s.DB]
		if !ok {
			continue
		}
		h, err := sql.Open(db.driver, db.dsn)
		if err != nil {
			return "", err
		}
		_, err = h.Exec(s.SQL)
		h.Close()
		if err != nil {
			return "", fmt.Errorf("setup %s: %s: %w", s.DB, s.SQL, err)
		}
	}
	return source, nil
}

// closeServerDBs drops run directory dir's databases.
func closeServerDBs(dir string) {
	serverDBs.Lock()
	dbs := serverDBs.m[dir]
	delete(serverDBs.m, dir)
	serverDBs.Unlock()
	for _, db := range dbs {
		db.drop()
	}
}

// isServerPlaceholder reports whether a SetupSQL's or an Artifact's path
// names a server database rather than a SQLite file.
func isServerPlaceholder(path string) bool {
	return path == pgPlaceholder || path == mariaPlaceholder || path == chPlaceholder || path == pgSourcePlaceholder
}

// openServerTable opens the database a table artifact of run directory
// dir lives in; ok is false when the directory has none for it.
func openServerTable(dir string, a Artifact) (h *sql.DB, query string, ok bool, err error) {
	serverDBs.Lock()
	db, ok := serverDBs.m[dir][a.Path]
	serverDBs.Unlock()
	if !ok {
		return nil, "", false, nil
	}
	h, err = sql.Open(db.driver, db.dsn)
	if err != nil {
		return nil, "", false, err
	}
	if db.driver == "clickhouse" {
		q, ok, err := openClickHouseTable(h, a)
		if !ok || err != nil {
			h.Close()
			return nil, "", false, err
		}
		return h, q, true, nil
	}
	count := `SELECT count(*) FROM information_schema.tables WHERE table_name = $1 AND table_schema = current_schema()`
	if db.driver == "mysql" {
		count = `SELECT count(*) FROM information_schema.tables WHERE table_name = ? AND table_schema = database()`
	}
	var n int
	if err := h.QueryRow(count, a.Table).Scan(&n); err != nil {
		h.Close()
		return nil, "", false, err
	}
	if n == 0 {
		h.Close()
		return nil, "", false, nil
	}
	q := `SELECT * FROM "` + a.Table + `"`
	if db.driver == "mysql" {
		q = "SELECT * FROM `" + a.Table + "`"
	}
	return h, q, true, nil
}
