package sql

import (
	"context"
	dbsql "database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// PremiseNoTriggers: the proof shows that a replayed row is absorbed by
// the table's key, not what a trigger does, and a replay fires some
// triggers again (BEFORE INSERT and statement triggers on every delivery,
// even one that conflicts; UPDATE triggers on every DO UPDATE; a
// PostgreSQL rule rewrites every statement). So the premise holds by an
// allow-list: no trigger at all, but PostgreSQL's internal ones (those
// that enforce foreign keys, which write nothing) and disabled ones,
// which never fire.

// trigger is one trigger (or PostgreSQL rule) found on a table.
type trigger struct {
	table, name, what string
}

func (t trigger) String() string {
	s := t.name
	if t.what != "" {
		s += " (" + t.what + ")"
	}
	return s
}

// checkNoTriggers checks PremiseNoTriggers on the sink's database. A
// missing table has none; the unique-key premise speaks for it.
func (s *sqlSink) checkNoTriggers(ctx context.Context, p plan.Premise) error {
	if p.Target == "" {
		return fmt.Errorf("the premise names no table")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var found []trigger
	var err error
	switch {
	case s.server != nil && s.server.dialect == dialectPostgres:
		found, err = s.server.triggersPG(ctx, p.Target)
	case s.server != nil:
		found, err = s.server.triggersMySQL(ctx, p.Target)
	default:
		found, err = s.triggersSQLite(ctx, p.Target)
	}
	if err != nil {
		return fmt.Errorf("read the triggers of %s: %v", p.Target, plan.RedactURLs(err.Error()))
	}
	if len(found) == 0 {
		return nil
	}
	names := make([]string, len(found))
	drops := make([]string, len(found))
	for i, t := range found {
		names[i] = t.String()
		drops[i] = dropTriggerSQL(s, t)
	}
	return &runtime.PremiseFailure{
		Found: fmt.Sprintf("table %s has %d trigger(s): %s — a replay after a crash can fire one again (a BEFORE INSERT or statement trigger on every delivery, an UPDATE trigger on every DO UPDATE), and mqb cannot see what it does, so the route's write absorbing the replay does not make the trigger's effect happen once",
			p.Target, len(found), strings.Join(names, "; ")),
		Fix: "move what the trigger does into the pipeline (a route of its own, or a sink with a key), or drop it: " + strings.Join(drops, "; "),
	}
}

// dropTriggerSQL is the statement that removes t.
func dropTriggerSQL(s *sqlSink, t trigger) string {
	switch {
	case s.server != nil && s.server.dialect == dialectPostgres && strings.HasPrefix(t.what, "rule"):
		return fmt.Sprintf("DROP RULE %s ON %s", sqliteQuote(t.name), t.table)
	case s.server != nil && s.server.dialect == dialectPostgres:
		return fmt.Sprintf("DROP TRIGGER %s ON %s", sqliteQuote(t.name), t.table)
	case s.server != nil:
		return "DROP TRIGGER " + t.name
	}
	return "DROP TRIGGER " + sqliteQuote(t.name)
}

// pgTriggersQuery lists the triggers and rules that fire on a write to a
// table or to any partition of it (a row routed to a partition fires the
// partition's triggers): every trigger but the internal ones (foreign
// keys) and the disabled ones, every rule but a view's _RETURN.
// PostgreSQL itself refuses ON CONFLICT on a table with an INSERT or
// UPDATE rule; the rules are read for any other statement.
const pgTriggersQuery = `WITH rel AS (` + pgTableAndPartitions + `)
SELECT t.tgrelid::regclass::text, t.tgname, pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN rel ON t.tgrelid = rel.relid
WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'
UNION ALL
SELECT r.ev_class::regclass::text, r.rulename, 'rule ' || pg_get_ruledef(r.oid)
FROM pg_rewrite r JOIN rel ON r.ev_class = rel.relid
WHERE r.rulename <> '_RETURN' AND r.ev_enabled <> 'D'
ORDER BY 1, 2`

// pgTableAndPartitions lists (as relid) the table named $1 and every
// partition under it; pg_partition_tree alone gives nothing for a table
// that is not partitioned.
const pgTableAndPartitions = `SELECT to_regclass($1) AS relid UNION SELECT relid FROM pg_partition_tree(to_regclass($1))`

func (s *sqlServerSink) triggersPG(ctx context.Context, target string) ([]trigger, error) {
	c, err := s.pg.get(ctx)
	if err != nil {
		return nil, err
	}
	defer s.pg.put(ctx, c)
	res := c.conn.ExecParams(ctx, pgTriggersQuery, [][]byte{[]byte(target)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	var out []trigger
	for _, row := range res.Rows {
		out = append(out, trigger{table: string(row[0]), name: string(row[1]), what: string(row[2])})
	}
	return out, nil
}

// triggersMySQL reads information_schema.TRIGGERS; an unqualified name is
// in the connection's database.
func (s *sqlServerSink) triggersMySQL(ctx context.Context, target string) ([]trigger, error) {
	schema, table := splitQualified(target)
	var schemaArg any
	if schema != "" {
		schemaArg = unquoteIdent(schema)
	}
	rows, err := s.my.QueryContext(ctx, `SELECT TRIGGER_SCHEMA, TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION FROM information_schema.TRIGGERS
WHERE EVENT_OBJECT_SCHEMA = COALESCE(?, DATABASE()) AND EVENT_OBJECT_TABLE = ? ORDER BY TRIGGER_NAME`, schemaArg, unquoteIdent(table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []trigger
	for rows.Next() {
		var db, name, timing, event string
		if err := rows.Scan(&db, &name, &timing, &event); err != nil {
			return nil, err
		}
		out = append(out, trigger{table: target, name: "`" + strings.ReplaceAll(db, "`", "``") + "`.`" + strings.ReplaceAll(name, "`", "``") + "`", what: timing + " " + event})
	}
	return out, rows.Err()
}

// triggersSQLite reads the triggers of the table's schema (a trigger lives
// in its table's schema; a TEMP one only on the connection that made it).
func (s *sqlSink) triggersSQLite(ctx context.Context, target string) ([]trigger, error) {
	schema, table := splitQualified(target)
	master := "sqlite_master"
	if schema != "" {
		master = sqliteQuote(unquoteIdent(schema)) + ".sqlite_master"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, err := s.conn.QueryContext(ctx, "SELECT name, sql FROM "+master+" WHERE type = 'trigger' AND tbl_name = ? COLLATE NOCASE ORDER BY name", unquoteIdent(table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []trigger
	for rows.Next() {
		var name string
		var def dbsql.NullString
		if err := rows.Scan(&name, &def); err != nil {
			return nil, err
		}
		out = append(out, trigger{table: target, name: name, what: firstLine(def.String)})
	}
	return out, rows.Err()
}

// firstLine is s up to its first line break, for a trigger's definition
// in a one-line message.
func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}
