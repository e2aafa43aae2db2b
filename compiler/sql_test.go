package compiler

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// p0, p1, … are placeholder markers as skeleton writes them.
const p0, p1, p2 = "\x010\x02", "\x011\x02", "\x012\x02"

func readInsert(t *testing.T, sql string, d sqlDialect) (*sqlInsert, error) {
	t.Helper()
	toks, err := lexSQL(sql, d)
	if err != nil {
		return nil, err
	}
	return parseSQLInsert(toks, d)
}

// TestSQLReader runs the insert_query reader over each dialect: what it
// reads (clause, columns, target, rows) and what it refuses, with why.
func TestSQLReader(t *testing.T) {
	tests := []struct {
		d       sqlDialect
		sql     string
		clause  string // "" for a plain INSERT
		columns string
		targets string
		rows    int
		err     string // a substring of the refusal
	}{
		{sqlSQLite, "INSERT INTO t (id, body) VALUES (" + p0 + ", " + p1 + ")", "", "id,body", "", 1, ""},
		{sqlSQLite, "insert into t (id, body) values (" + p0 + ", " + p1 + ") on conflict (id) do nothing", "ON CONFLICT (id) DO NOTHING", "id,body", "id", 1, ""},
		{sqlSQLite, "INSERT INTO t (id) VALUES (" + p0 + ") ON CONFLICT DO NOTHING", "ON CONFLICT DO NOTHING", "id", "", 1, ""},
		{sqlSQLite, "INSERT OR IGNORE INTO t (id) VALUES (" + p0 + ")", "INSERT OR IGNORE", "id", "", 1, ""},
		{sqlSQLite, "INSERT OR REPLACE INTO t (id) VALUES (" + p0 + ")", "INSERT OR REPLACE", "id", "", 1, ""},
		{sqlSQLite, "REPLACE INTO t (id) VALUES (" + p0 + ")", "REPLACE INTO", "id", "", 1, ""},
		{sqlSQLite, "-- upsert\nINSERT INTO \"t\" ([id]) VALUES (" + p0 + ") /* c */ ON CONFLICT (`id`) DO NOTHING;", "ON CONFLICT (id) DO NOTHING", "id", "id", 1, ""},
		{sqlSQLite, "INSERT INTO t (id, b) VALUES (" + p0 + ", 'x'), (" + p1 + ", 'y') ON CONFLICT (id) DO NOTHING", "ON CONFLICT (id) DO NOTHING", "id,b", "id", 2, ""},
		{sqlSQLite, "INSERT INTO t (id) VALUES (" + p0 + ") RETURNING 'ON CONFLICT (id) DO NOTHING'", "", "id", "", 1, ""},
		{sqlSQLite, "INSERT INTO t (id) VALUES (" + p0 + ") ON CONFLICT (id) DO NOTHING; DELETE FROM t", "", "", "", 0, "a second statement"},
		{sqlSQLite, "INSERT INTO t (id) VALUES (" + p0 + ") ON CONFLICT (id) DO NOTHING ON CONFLICT DO NOTHING", "", "", "", 0, "a second ON CONFLICT"},
		{sqlSQLite, "INSERT INTO t (a, b) VALUES (1)", "", "", "", 0, "1 values for 2 columns"},
		{sqlSQLite, "INSERT INTO t SELECT * FROM u", "", "", "", 0, "names no column list"},
		{sqlSQLite, "INSERT INTO t (a) SELECT a FROM u", "", "", "", 0, "INSERT … SELECT"},
		{sqlSQLite, "UPDATE t SET a = 1", "", "", "", 0, "not an INSERT"},
		{sqlSQLite, "INSERT INTO t (a) VALUES ((SELECT max(a) FROM t))", "", "", "", 0, "a subquery"},
		{sqlSQLite, "INSERT INTO t (a) VALUES (CASE WHEN 1 THEN 2 END)", "", "", "", 0, "CASE"},
		{sqlSQLite, "INSERT IGNORE INTO t (a) VALUES (1)", "", "", "", 0, "MySQL's form"},
		{sqlSQLite, "INSERT INTO t (a) VALUES (" + p0 + ") ON CONFLICT (a) WHERE a > 0 DO NOTHING", "", "", "", 0, "partial index"},
		{sqlPostgres, "INSERT INTO t AS x (id, b) VALUES (" + p0 + ", " + p1 + "::text) ON CONFLICT (id) DO UPDATE SET b = excluded.b WHERE excluded.v > x.v RETURNING x.id, 'a' AS tag", "ON CONFLICT (id) DO UPDATE", "id,b", "id", 1, ""},
		{sqlPostgres, "INSERT INTO t (id) VALUES (" + p0 + ") ON CONFLICT ON CONSTRAINT t_pkey DO NOTHING", "", "", "", 0, "ON CONSTRAINT"},
		{sqlPostgres, "WITH x AS (SELECT 1) INSERT INTO t (id) VALUES (1)", "", "", "", 0, "WITH clause"},
		{sqlPostgres, "INSERT INTO t (id) VALUES ($1)", "", "", "", 0, "$n parameter"},
		{sqlPostgres, "REPLACE INTO t (id) VALUES (" + p0 + ")", "", "", "", 0, "not a PostgreSQL statement"},
		{sqlPostgres, "INSERT INTO t (id) VALUES (" + p0 + ") ON DUPLICATE KEY UPDATE id = id", "", "", "", 0, "MySQL's form"},
		{sqlMySQL, "INSERT INTO t (id, b) VALUES (" + p0 + ", 'x,y') ON DUPLICATE KEY UPDATE b = VALUES(b)", "ON DUPLICATE KEY UPDATE", "id,b", "", 1, ""},
		{sqlMySQL, "INSERT INTO t (id, b) VALUE (" + p0 + ", \"it\\'s\") AS new (i, c) ON DUPLICATE KEY UPDATE b = new.c", "ON DUPLICATE KEY UPDATE", "id,b", "", 1, ""},
		{sqlMySQL, "INSERT IGNORE INTO t (id) VALUES (" + p0 + ")", "INSERT IGNORE", "id", "", 1, ""},
		{sqlMySQL, "INSERT INTO t (id) VALUES (" + p0 + ") # note\n", "", "id", "", 1, ""},
		{sqlMySQL, "INSERT INTO t (id) VALUES (" + p0 + ") ON CONFLICT (id) DO NOTHING", "", "", "", 0, "ON CONFLICT is not"},
		{sqlMySQL, "INSERT /*! HIGH_PRIORITY */ INTO t (id) VALUES (1)", "", "", "", 0, "executable comment"},
		{sqlAnyDialect, "INSERT INTO t (id) VALUES (" + p0 + ") ON CONFLICT (id) DO NOTHING", "ON CONFLICT (id) DO NOTHING", "id", "id", 1, ""},
	}
	for _, tt := range tests {
		ins, err := readInsert(t, tt.sql, tt.d)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s %q: err = %v, want one saying %q", tt.d, tt.sql, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: %v", tt.d, tt.sql, err)
			continue
		}
		if ins.clause != tt.clause || strings.Join(ins.columns, ",") != tt.columns || strings.Join(ins.targets, ",") != tt.targets || len(ins.rows) != tt.rows {
			t.Errorf("%s %q = clause %q columns %q targets %q rows %d; want %q %q %q %d",
				tt.d, tt.sql, ins.clause, ins.columns, ins.targets, len(ins.rows), tt.clause, tt.columns, tt.targets, tt.rows)
		}
	}
}

// TestSQLQuotedPlaceholder: a placeholder inside quotes or a comment is
// refused as such; the fix is written as one placeholder.
func TestSQLQuotedPlaceholder(t *testing.T) {
	parts := []partInfo{{lit: "INSERT INTO t (id) VALUES ('ord-"}, {expr: "payload.id", isExpr: true}, {lit: "')"}}
	for _, tt := range []struct {
		sql, where string
		d          sqlDialect
	}{
		{"INSERT INTO t (id) VALUES ('ord-" + p1 + "')", "an SQL string literal", sqlSQLite},
		{"INSERT INTO t (id) VALUES (\"ord-" + p1 + "\")", "an SQL string literal", sqlMySQL},
		{"INSERT INTO \"t" + p1 + "\" (id) VALUES (1)", "a quoted SQL identifier", sqlPostgres},
		{"INSERT INTO t (id) VALUES (1) -- " + p1, "an SQL comment", sqlSQLite},
	} {
		_, err := lexSQL(tt.sql, tt.d)
		le, ok := err.(*sqlLexError)
		if !ok || !le.quotedParam || le.where != tt.where {
			t.Errorf("%q: err = %v, want a placeholder inside %s", tt.sql, err, tt.where)
		}
	}
	for _, tt := range []struct{ frag, want string }{
		{"'ord-" + p1 + "'", `${"ord-" + payload.id}`},
		{"'" + p1 + "'", `${payload.id}`},
		{"'" + p1 + "-x'", `${payload.id + "-x"}`},
	} {
		if got := quotedPlaceholderFix(tt.frag, parts); got != tt.want {
			t.Errorf("quotedPlaceholderFix(%q) = %s, want %s", tt.frag, got, tt.want)
		}
	}
}

// TestSQLStability: the per-dialect allow-list of deterministic
// functions decides, never a list of volatile ones.
func TestSQLStability(t *testing.T) {
	parts := []partInfo{{expr: "payload.id", isExpr: true, stab: stableValue}, {expr: "message_id", isExpr: true, stab: perDelivery("fresh per read")}}
	tests := []struct {
		d      sqlDialect
		value  string
		stable bool
	}{
		{sqlSQLite, p0, true},
		{sqlSQLite, p1, false},
		{sqlSQLite, "lower(" + p0 + ")", true},
		{sqlSQLite, "hex(randomblob(16))", false},
		{sqlSQLite, "random ()", false},
		{sqlSQLite, "random(/* c */)", false},
		{sqlSQLite, "upper(" + p0 + ") || '-' || 1", true},
		{sqlSQLite, "my_udf(" + p0 + ")", false},
		{sqlSQLite, "CURRENT_TIMESTAMP", false},
		{sqlSQLite, "DEFAULT", false},
		{sqlSQLite, "datetime('now')", false},
		{sqlPostgres, "gen_random_uuid()", false},
		{sqlPostgres, "concat(" + p0 + ", 'x')", true},
		{sqlPostgres, p0 + "::text", true},
		{sqlPostgres, "'now'::timestamptz", false},
		{sqlPostgres, "CAST('today' AS date)", false},
		{sqlPostgres, "ifnull(" + p0 + ", 'x')", false}, // not a PostgreSQL function
		{sqlMySQL, "concat(" + p0 + ", 'x')", true},
		{sqlMySQL, "uuid()", false},
		{sqlMySQL, "sha2(" + p0 + ", 256)", true},
		{sqlAnyDialect, "lower(" + p0 + ")", true},
		{sqlAnyDialect, "concat(" + p0 + ", 'x')", false}, // not SQLite's
	}
	for _, tt := range tests {
		ins, err := readInsert(t, "INSERT INTO t (id) VALUES ("+tt.value+")", tt.d)
		if err != nil {
			t.Errorf("%s %q: %v", tt.d, tt.value, err)
			continue
		}
		if st := sqlStability(ins.rows[0][0], parts, tt.d); st.Stable != tt.stable {
			t.Errorf("%s %q: stable = %v (%s), want %v", tt.d, tt.value, st.Stable, st.Why, tt.stable)
		}
	}
}

// TestSQLConvergence: an update is idempotent only when each SET writes
// the value the INSERT writes; a version guard is recognised as such.
func TestSQLConvergence(t *testing.T) {
	parts := []partInfo{{expr: "payload.k", isExpr: true, stab: stableValue}, {expr: "payload.q", isExpr: true, stab: stableValue}, {expr: "now()", isExpr: true, stab: perDelivery("now")}}
	tests := []struct {
		d         sqlDialect
		sql       string
		converges bool
		guarded   bool
	}{
		{sqlSQLite, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = excluded.q", true, false},
		{sqlSQLite, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = EXCLUDED.Q, k = k", true, false},
		{sqlSQLite, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = " + p1, true, false},
		{sqlSQLite, "INSERT INTO t AS x (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = x.q + excluded.q", false, false},
		{sqlSQLite, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = excluded.k", false, false},
		{sqlSQLite, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET n = 1", false, false},
		{sqlSQLite, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p2 + ") ON CONFLICT (k) DO UPDATE SET q = excluded.q", false, false},
		{sqlPostgres, "INSERT INTO t AS x (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = excluded.q WHERE excluded.q > x.q", true, true},
		{sqlPostgres, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = excluded.q WHERE t.q < excluded.q", true, true},
		{sqlPostgres, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = excluded.q WHERE excluded.q >= t.q", true, false},
		{sqlPostgres, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON CONFLICT (k) DO UPDATE SET q = VALUES(q)", false, false},
		{sqlMySQL, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON DUPLICATE KEY UPDATE q = VALUES(q)", true, false},
		{sqlMySQL, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") AS n ON DUPLICATE KEY UPDATE q = n.q", true, false},
		{sqlMySQL, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") AS n (a, b) ON DUPLICATE KEY UPDATE q = n.a", false, false},
		{sqlMySQL, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON DUPLICATE KEY UPDATE q = q + VALUES(q)", false, false},
		{sqlMySQL, "INSERT INTO t (k, q) VALUES (" + p0 + ", " + p1 + ") ON DUPLICATE KEY UPDATE q = excluded.q", false, false},
	}
	for _, tt := range tests {
		ins, err := readInsert(t, tt.sql, tt.d)
		if err != nil {
			t.Errorf("%s %q: %v", tt.d, tt.sql, err)
			continue
		}
		ok, why := ins.convergence(parts, tt.d)
		if ok != tt.converges {
			t.Errorf("%s %q: converges = %v (%s), want %v", tt.d, tt.sql, ok, why, tt.converges)
		}
		if _, g := ins.versionGuard(parts, tt.d); g != tt.guarded {
			t.Errorf("%s %q: guarded = %v, want %v", tt.d, tt.sql, g, tt.guarded)
		}
	}
}

// TestSQLCreateTable reads the unique keys a create_table script gives.
func TestSQLCreateTable(t *testing.T) {
	tests := []struct {
		d       sqlDialect
		ddl     string
		found   bool
		unsure  bool
		uniques string // sets joined by ";"
		autoinc string
	}{
		{sqlSQLite, "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, body TEXT NOT NULL)", true, false, "id", ""},
		{sqlSQLite, "CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, oid TEXT UNIQUE, CHECK (length(oid) > 0))", true, false, "id;oid", "id"},
		{sqlSQLite, "CREATE TABLE other (id TEXT PRIMARY KEY)", false, false, "", ""},
		{sqlSQLite, "CREATE TABLE orders (a TEXT, b TEXT, PRIMARY KEY (a, b)); CREATE UNIQUE INDEX IF NOT EXISTS o2 ON orders (b DESC)", true, false, "a,b;b", ""},
		{sqlSQLite, "CREATE TABLE orders (a TEXT); CREATE UNIQUE INDEX o2 ON orders (lower(a))", true, true, "", ""},
		{sqlSQLite, "CREATE TABLE orders (a TEXT); CREATE UNIQUE INDEX o2 ON orders (a) WHERE a IS NOT NULL", true, true, "", ""},
		{sqlSQLite, "CREATE TABLE orders (a TEXT); ALTER TABLE orders ADD COLUMN b TEXT", true, true, "", ""},
		{sqlPostgres, "CREATE TABLE IF NOT EXISTS public.orders (id bigserial PRIMARY KEY, oid text NOT NULL, CONSTRAINT uq UNIQUE (oid))", true, false, "id;oid", "id"},
		{sqlPostgres, "CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, oid text)", true, false, "id", "id"},
		{sqlMySQL, "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, oid VARCHAR(64), KEY k (oid), UNIQUE KEY u (oid(10)))", true, true, "id", "id"},
		{sqlMySQL, "CREATE TABLE `orders` (`id` BIGINT AUTO_INCREMENT, `oid` VARCHAR(64), PRIMARY KEY (`id`), UNIQUE INDEX u (`oid`))", true, false, "id;oid", "id"},
	}
	for _, tt := range tests {
		keys, found := readCreateTable(tt.ddl, "orders", tt.d)
		if found != tt.found {
			t.Errorf("%q: found = %v, want %v", tt.ddl, found, tt.found)
			continue
		}
		if !found {
			continue
		}
		var sets []string
		for _, u := range keys.uniques {
			sets = append(sets, strings.Join(u, ","))
		}
		var auto []string
		for c := range keys.autoinc {
			auto = append(auto, c)
		}
		if keys.unsure != tt.unsure || !tt.unsure && strings.Join(sets, ";") != tt.uniques || strings.Join(auto, ",") != tt.autoinc {
			t.Errorf("%q: unsure %v uniques %q autoinc %q; want %v %q %q", tt.ddl, keys.unsure, sets, auto, tt.unsure, tt.uniques, tt.autoinc)
		}
	}
}

// TestSQLCreateTableOmitted reads what a column an INSERT leaves out gets:
// a new value on every insert (autoinc), a literal DEFAULT other than
// NULL, a computed one, or NULL (nullWhenOmitted); and the keys that
// leave the table unsure (NULLS NOT DISTINCT, an exclusion constraint).
func TestSQLCreateTableOmitted(t *testing.T) {
	tests := []struct {
		d        sqlDialect
		ddl      string
		unsure   bool
		autoinc  string // sorted, joined by ","
		literal  string // col=default, sorted
		volatile string // sorted
		null     string // sorted
	}{
		{sqlSQLite, "CREATE TABLE orders (k TEXT, v TEXT DEFAULT 'x', UNIQUE (k, v))", false, "", "v='x'", "", "k"},
		{sqlSQLite, "CREATE TABLE orders (k TEXT NOT NULL, v TEXT DEFAULT NULL, w INT DEFAULT (-1), x TEXT DEFAULT CURRENT_TIMESTAMP)", false, "", "w=(- 1)", "x", "v"},
		{sqlSQLite, "CREATE TABLE orders (id INTEGER PRIMARY KEY, k TEXT, g TEXT GENERATED ALWAYS AS (k || 'x') STORED, h TEXT AS (upper(k)))", false, "id", "", "", "k"},
		{sqlSQLite, "CREATE TABLE orders (id INTEGER PRIMARY KEY, k TEXT) WITHOUT ROWID", false, "", "", "", "k"},
		{sqlSQLite, "CREATE TABLE orders (a TEXT, b TEXT, PRIMARY KEY (a, b))", false, "", "", "", ""},
		{sqlPostgres, "CREATE TABLE orders (id integer PRIMARY KEY, n serial, m bigint DEFAULT nextval('s'::regclass), o bigint DEFAULT nextval('s') + 1, k text, d mydomain)", false, "m,n", "", "m,o", "k"},
		{sqlPostgres, "CREATE TABLE orders (id bigint GENERATED BY DEFAULT AS IDENTITY, k varchar(10), t timestamp with time zone)", false, "id", "", "", "k,t"},
		{sqlPostgres, "CREATE TABLE orders (k text, v text, UNIQUE NULLS NOT DISTINCT (k, v))", true, "", "", "", "k,v"},
		{sqlPostgres, "CREATE TABLE orders (k text, v text UNIQUE NULLS NOT DISTINCT)", true, "", "", "", "k,v"},
		{sqlPostgres, "CREATE TABLE orders (k text, v text); CREATE UNIQUE INDEX o_kv ON orders (k, v) NULLS NOT DISTINCT", true, "", "", "", "k,v"},
		{sqlPostgres, "CREATE TABLE orders (k text, v text, EXCLUDE USING gist (k WITH =))", true, "", "", "", "k,v"},
		{sqlPostgres, "CREATE TABLE orders (k text, v text, CONSTRAINT no_overlap EXCLUDE USING gist (k WITH =))", true, "", "", "", "k,v"},
		{sqlMySQL, "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(40), t TIMESTAMP, u TIMESTAMP NULL, s VARCHAR(5) DEFAULT 'a')", false, "id", "s='a'", "", "k"},
		{sqlAnyDialect, "CREATE TABLE orders (id INTEGER PRIMARY KEY, k TEXT)", false, "", "", "", "k"},
	}
	sorted := func(m map[string]bool) string {
		var out []string
		for k, v := range m {
			if v {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	for _, tt := range tests {
		keys, found := readCreateTable(tt.ddl, "orders", tt.d)
		if !found {
			t.Errorf("%q: not found", tt.ddl)
			continue
		}
		var lits, vols []string
		for c, v := range keys.literalDefaults {
			lits = append(lits, c+"="+v)
		}
		for c := range keys.volatileDefaults {
			vols = append(vols, c)
		}
		sort.Strings(lits)
		sort.Strings(vols)
		got := []string{fmt.Sprint(keys.unsure), sorted(keys.autoinc), strings.Join(lits, ","), strings.Join(vols, ","), sorted(keys.nullWhenOmitted)}
		want := []string{fmt.Sprint(tt.unsure), tt.autoinc, tt.literal, tt.volatile, tt.null}
		if strings.Join(got, " | ") != strings.Join(want, " | ") {
			t.Errorf("%s %q:\n got unsure|autoinc|literal|volatile|null %s\nwant %s", tt.d, tt.ddl, strings.Join(got, " | "), strings.Join(want, " | "))
		}
	}
}

// TestSQLRepeatHits: which unique keys refuse the repeat of an insert
// into (k), by what the columns it leaves out get.
func TestSQLRepeatHits(t *testing.T) {
	const ddl = "CREATE TABLE orders (n INTEGER PRIMARY KEY, k TEXT, lit TEXT DEFAULT 'x', nul TEXT, nn TEXT NOT NULL, ts TEXT DEFAULT CURRENT_TIMESTAMP)"
	inserted := map[string]bool{"k": true}
	for _, tt := range []struct {
		d    sqlDialect
		u    []string
		hits bool
	}{
		{sqlSQLite, []string{"k"}, true},
		{sqlSQLite, []string{"k", "lit"}, true},
		{sqlSQLite, []string{"k", "nul"}, false},
		{sqlSQLite, []string{"k", "nn"}, true},
		{sqlSQLite, []string{"k", "ts"}, true},
		{sqlSQLite, []string{"k", "n"}, false},
		{sqlSQLite, []string{"lit", "nul"}, false},
		{sqlSQLite, []string{"K", "LIT"}, true},
		{sqlAnyDialect, []string{"k", "nul"}, true}, // NULLs may not be distinct there
		{sqlSQLite, nil, false},
	} {
		keys, _ := readCreateTable(ddl, "orders", tt.d)
		if got := keys.repeatHits(tt.u, inserted, tt.d); got != tt.hits {
			t.Errorf("%s unique (%s): repeatHits = %v, want %v", tt.d, strings.Join(tt.u, ", "), got, tt.hits)
		}
	}
}

// TestSQLStrayMarkers: \x01 and \x02 are the bytes of skeleton's
// placeholder markers. Written into insert_query itself, anywhere (between
// tokens, in a string literal, a quoted identifier or a comment, as a
// marker's opening without its close, or as a whole marker), they never
// crash the reader, never read as a placeholder (nor a placeholder in
// quotes, E046), and leave the statement unread: at-least-once, with why.
// The first case is what FuzzCompile found (a lone \x01 panicked lexSQL).
func TestSQLStrayMarkers(t *testing.T) {
	const conflict = " ON CONFLICT (id) DO NOTHING"
	tests := []struct {
		name, url, query string
		char             string // the control character the reason names
	}{
		{"lone 01", "sqlite://o.db", "INSERT INTO t (id) VALUES (${payload.id}) \x01" + conflict, "U+0001"},
		{"lone 02", "sqlite://o.db", "INSERT INTO t (id) VALUES (${payload.id}) \x02" + conflict, "U+0002"},
		{"01 at the end", "sqlite://o.db", "INSERT INTO t (id) VALUES (${payload.id})" + conflict + "\x01", "U+0001"},
		{"01 and digits, no 02", "sqlite://o.db", "INSERT INTO t (id) VALUES (\x010, ${payload.id})" + conflict, "U+0001"},
		{"01 02 without digits", "sqlite://o.db", "INSERT INTO t (id) VALUES (\x01\x02)" + conflict, "U+0001"},
		{"02 then 01", "sqlite://o.db", "INSERT INTO t (id) VALUES (\x02\x010\x02)" + conflict, "U+0002"},
		{"overlong digits", "sqlite://o.db", "INSERT INTO t (id) VALUES (\x0199999999999999999999\x02)" + conflict, "U+0001"},
		// A whole marker naming the second part, payload.b: read as a
		// placeholder it would bind id to a stable value.
		{"whole marker", "sqlite://o.db", "INSERT INTO t (id, b) VALUES (\x011\x02, ${payload.b})" + conflict, "U+0001"},
		{"in a string literal", "sqlite://o.db", "INSERT INTO t (id, b) VALUES (${payload.id}, 'a\x01b')" + conflict, "U+0001"},
		{"whole marker in a string literal", "sqlite://o.db", "INSERT INTO t (id, b) VALUES (${payload.id}, 'a\x010\x02')" + conflict, "U+0001"},
		{"in a double-quoted MySQL string", "mysql://u@h/db", "INSERT INTO t (id, b) VALUES (${payload.id}, \"a\x02\") ON DUPLICATE KEY UPDATE id = id", "U+0002"},
		{"in a quoted identifier", "postgres://h/db", "INSERT INTO \"t\x01\" (id) VALUES (${payload.id})" + conflict, "U+0001"},
		{"in a backquoted identifier", "sqlite://o.db", "INSERT INTO `t\x02` (id) VALUES (${payload.id})" + conflict, "U+0002"},
		{"in a line comment", "sqlite://o.db", "-- note \x01\nINSERT INTO t (id) VALUES (${payload.id})" + conflict, "U+0001"},
		{"in a block comment", "sqlite://o.db", "INSERT INTO t (id) VALUES (${payload.id}) /* \x011\x02 */" + conflict, "U+0001"},
		{"in a MySQL # comment", "mysql://u@h/db", "INSERT INTO t (id) VALUES (${payload.id}) ON DUPLICATE KEY UPDATE id = id # \x02", "U+0002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fmt.Sprintf("route r {\n  from file { path = \"in.jsonl\" }\n  to sql { url = %q, insert_query = \"\"\"%s\"\"\" }\n}\n", tt.url, tt.query)
			p, diags := CompileSources([]Source{{"in.mqb", []byte(src)}})
			for _, d := range diags {
				if d.Code == "E046" || d.Code == "E001" || d.Code == "E002" {
					t.Errorf("diagnostic %s: %s", d.Code, d.Summary)
				}
			}
			if len(p.Routes) != 1 {
				t.Fatalf("%d routes, want 1 (diagnostics %v)", len(p.Routes), diags)
			}
			line := VerdictLine(p.Routes[0])
			if p.Routes[0].Guarantee != plan.AtLeastOnce || !strings.Contains(line, "mqb reads insert_query only in full") || !strings.Contains(line, tt.char) {
				t.Errorf("verdict %s\nwant at-least-once: insert_query unread, naming %s", line, tt.char)
			}
		})
	}

	// The reader itself, given what skeleton never writes: an error, not
	// a panic, never a placeholder, never a placeholder in quotes.
	for _, s := range []string{
		"\x01", "\x02", "a \x01", "\x01 a", "\x0112", "\x01\x02", "\x01x\x02", "\x011", "\x011\x01", "\x02" + p0, p0 + "\x02",
		"\x011234567890\x02", "'\x01'", "'" + p0 + "\x02'", "\"t\x01\"", "-- \x01", "/* \x0112 */", "VALUES (\x0112, 1)",
	} {
		for _, d := range []sqlDialect{sqlAnyDialect, sqlSQLite, sqlPostgres, sqlMySQL} {
			toks, err := lexSQL(s, d)
			le, ok := err.(*sqlLexError)
			if !ok || le.quotedParam || !strings.Contains(le.msg, "control character") {
				t.Errorf("%s lexSQL(%q) = %v, %v; want the statement refused for a control character", d, s, toks, err)
			}
		}
	}
	// A whole marker is still a placeholder.
	if toks, err := lexSQL("VALUES ("+p0+", "+p2+")", sqlSQLite); err != nil || len(toks) != 7 || toks[2].kind != tParam || toks[4].kind != tParam || toks[4].num != 2 {
		t.Errorf("lexSQL of two markers = %v, %v", toks, err)
	}
	// create_table is read as written: a marker byte in it leaves it unread.
	for _, ddl := range []string{"CREATE TABLE orders (id TEXT PRIMARY KEY)\x01", "CREATE TABLE orders (id TEXT PRIMARY KEY, b TEXT DEFAULT " + p0 + ")"} {
		if _, found := readCreateTable(ddl, "orders", sqlSQLite); found {
			t.Errorf("readCreateTable(%q) read it", ddl)
		}
	}
}

// TestSQLReplaceUnfilledIntegerKey: an INTEGER PRIMARY KEY is numbered by
// the database only as SQLite's rowid; elsewhere (MySQL, a WITHOUT ROWID
// table) a REPLACE that leaves it out is not proven to give it back.
func TestSQLReplaceUnfilledIntegerKey(t *testing.T) {
	for _, tt := range []struct{ url, ddl, query, want string }{
		{"mysql://u@h/db", "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, oid VARCHAR(40) UNIQUE, body TEXT)",
			"REPLACE INTO orders (oid, body) VALUES (${payload.oid}, ${payload.body})", "which the database does not number"},
		{"sqlite://o.db", "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, oid TEXT UNIQUE, body TEXT) WITHOUT ROWID",
			"INSERT OR REPLACE INTO orders (oid, body) VALUES (${payload.oid}, ${payload.body})", "which the database does not number"},
		{"sqlite://o.db", "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, oid TEXT UNIQUE, body TEXT)",
			"INSERT OR REPLACE INTO orders (oid, body) VALUES (${payload.oid}, ${payload.body})", "its auto-increment column id changes on a replay"},
	} {
		src := fmt.Sprintf("route r {\n  from file { path = \"in.jsonl\" }\n  to sql {\n    url = %q\n    create_table = %q\n    insert_query = %q\n  }\n}\n", tt.url, tt.ddl, tt.query)
		p, _ := CompileSources([]Source{{"in.mqb", []byte(src)}})
		if len(p.Routes) != 1 {
			t.Fatalf("%s: no route", tt.ddl)
		}
		if line := VerdictLine(p.Routes[0]); p.Routes[0].Guarantee != plan.AtLeastOnce || !strings.Contains(line, tt.want) {
			t.Errorf("%s %s:\n%s\nwant at-least-once: %s", tt.url, tt.ddl, line, tt.want)
		}
	}
}
