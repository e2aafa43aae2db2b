package compiler

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/plan"
)

// The proofs of key-addressed sinks: SQL, MongoDB, ClickHouse.

func (rc *routeCtx) proveSQL(n *nodeInfo) sinkProof {
	iq := n.attrs["insert_query"]
	reportOutcome := boolAttr(n, "report_outcome")
	var p sinkProof
	defer func() {
		if reportOutcome && !p.ok && !p.keyed && !rc.inNamedUnused {
			rc.c.add("E043", n.attrs["report_outcome"].rng, fmt.Sprintf("sql report_outcome in route %s has no deterministic key", rc.name),
				"Without conflict columns bound to stable values there is no duplicate to detect, so the outcome would always be `inserted`.")
		}
	}()
	if iq == nil {
		if n.role != plan.RoleSource {
			rc.c.add("E016", n.rng, "sql sink needs insert_query",
				"insert_query is an INSERT with every ${…} bound as a parameter, e.g. INSERT INTO t (id, body) VALUES (${meta[\"mqb.id\"]}, ${payload.body}) ON CONFLICT (id) DO NOTHING. This runtime does not insert a payload's fields by table name.")
		}
		p.missing = "the sql sink has no insert_query"
		return p
	}
	parts := iq.parts
	if parts == nil {
		parts = []partInfo{{lit: iq.val.Str, stab: stableValue}}
	}
	url, _, _ := urlText(n.attrs["url"])
	d := dialectOf(url)
	if ct := n.attrs["create_table"]; ct != nil && !rc.inNamedUnused {
		if bad := rerunUnsafeDDL(ct.val.Str, d); bad != "" {
			rc.c.add("E064", ct.rng, fmt.Sprintf("create_table in route %s runs %s on every start", rc.name, bad),
				"create_table runs each time the route starts, after a crash too: a CREATE without IF NOT EXISTS fails the restart (\"already exists\"), and anything else (DROP, CREATE OR REPLACE, DELETE, ALTER) can drop or change rows an earlier run committed. Write each statement as CREATE TABLE|INDEX … IF NOT EXISTS, and run other DDL once, outside mqb.")
		}
	}
	skel, err := skeleton(parts)
	var toks []sqlTok
	if err == nil {
		toks, err = lexSQL(skel, d)
	}
	if le, ok := err.(*sqlLexError); ok && le.quotedParam {
		frag := showValue(le.fragment, parts)
		if !rc.inNamedUnused {
			detail := fmt.Sprintf("Inside %s the placeholder is sent as text, not bound, so the statement's parameters do not match and every write fails.", le.where)
			if le.where == "an SQL string literal" {
				detail += fmt.Sprintf(" Build the whole value in one placeholder, outside the quotes: %s instead of %s (wrap a number in string(…)).", quotedPlaceholderFix(le.fragment, parts), frag)
			} else {
				detail += " Move the placeholder out of it."
			}
			rc.c.add("E046", iq.rng, fmt.Sprintf("insert_query in route %s puts a ${…} placeholder inside %s: %s", rc.name, le.where, frag), detail)
		}
		p.missing = fmt.Sprintf("insert_query puts a placeholder inside %s", le.where)
		return p
	}
	var ins *sqlInsert
	if err == nil {
		ins, err = parseSQLInsert(toks, d)
	}
	if err != nil {
		p.reasons = []string{"write: insert_query is not a statement mqb can read in full"}
		p.missing = fmt.Sprintf("sink write is not proven idempotent: cannot prove: mqb reads insert_query only in full, and %s", showValue(err.Error(), parts))
		// What mqb cannot read may be a plain INSERT into a keyed table,
		// whose replay fails: assume it may (a handler's failure then
		// keeps the record from the sink).
		p.replayFails = true
		return p
	}
	if ins.returning && d == sqlSQLite && !rc.inNamedUnused {
		rc.c.add("E063", iq.rng, fmt.Sprintf("insert_query in route %s ends with RETURNING, which a SQLite sink cannot run", rc.name),
			"The sink discards what RETURNING gives back, and SQLite keeps the statement open until its rows are read, so the batch's commit fails (\"SQL statements in progress\") on every run. Drop the RETURNING clause; a report_outcome sink already tells inserted from existed.")
	}
	if ins.kind != conflictNone && boolAttr(n, "bulk_copy") && !rc.inNamedUnused {
		rc.c.add("E042", n.attrs["bulk_copy"].rng, fmt.Sprintf("sql bulk_copy in route %s cannot honour %s", rc.name, ins.clause),
			"COPY cannot express a conflict clause; pick bulk speed (drop the clause) or deduplication (drop bulk_copy).")
	}
	if ins.kind == conflictNone {
		first := ins.columns[0]
		if !rc.inNamedUnused && !rc.outbox {
			rc.warn("W006", iq.rng, fmt.Sprintf("insert_query into %s in route %s is a plain INSERT without a conflict clause", ins.table, rc.name),
				fmt.Sprintf("A replay fails the row as a non-retryable constraint error (to the DLQ) or inserts it twice. Add ON CONFLICT (%s) DO NOTHING, or ON DUPLICATE KEY UPDATE on MySQL.", first))
		}
		p.reasons = []string{fmt.Sprintf("write: plain INSERT into %s", ins.table)}
		p.missing = fmt.Sprintf("sink write is not idempotent: plain INSERT; add ON CONFLICT (%s) DO NOTHING", first)
		p.replayFails, p.replayPremises = rc.insertMayHitUniqueKey(n, ins, d)
		p.table = ins.table
		return p
	}
	if strings.Contains(ins.clause, "IGNORE") && !rc.inNamedUnused {
		fix := "ON CONFLICT (k) DO NOTHING"
		if d == sqlMySQL {
			fix = "ON DUPLICATE KEY UPDATE k = k"
		}
		rc.warn("W009", iq.rng, fmt.Sprintf("insert_query into %s in route %s uses %s, which skips or alters a row for any error, not only a repeated key", ins.table, rc.name, ins.clause),
			fmt.Sprintf("A record it cannot store as it is never reaches the DLQ and is counted as written. %s absorbs repeats of the key k and dead-letters every other refused row.", fix))
	}
	if ins.kind == conflictColumns && !rc.inNamedUnused {
		rc.warnConflictTarget(n, ins, iq.rng, d)
	}
	p = rc.proveUpsert(n, ins, parts, d)
	p.table = ins.table
	if !p.ok {
		fails, premises := rc.upsertMayFailOnReplay(n, ins, parts, d)
		if fails {
			p.replayFails = true
			p.replayWhy = fmt.Sprintf("its %s may fail when replayed: the repeat does not conflict on the target (a column of it is not inserted, or is bound per delivery), so it fails when table %s has another unique key whose values the repeat writes again (the inserted columns, and a left-out one whose DEFAULT gives it the same value)", ins.clause, ins.table)
		} else {
			p.replayPremises = premises
		}
	}
	return p
}

// upsertMayFailOnReplay reports whether the repeat of a write with a
// conflict clause can fail on a unique key the clause does not handle (a
// handler's failed replay then keeps the record from the sink). It cannot
// when the clause handles any key (DO NOTHING without a target, IGNORE,
// REPLACE, ON DUPLICATE KEY UPDATE), or when every column of its conflict
// target is inserted from a stable value: the repeat then conflicts on the
// target itself, which the clause handles. Otherwise the repeat conflicts
// on no target and fails on any other unique key that refuses it
// (repeatHits; a conflict target the INSERT does not write is NULL, and
// NULL never conflicts): unless create_table shows that there is none, it
// may. That answer rests on the premise returned when the table may
// already exist with other keys.
func (rc *routeCtx) upsertMayFailOnReplay(n *nodeInfo, ins *sqlInsert, parts []partInfo, d sqlDialect) (bool, []premiseAt) {
	if ins.kind != conflictColumns {
		return false, nil
	}
	targetStable := len(ins.targets) > 0
	for _, col := range ins.targets {
		i := indexOf(ins.columns, col)
		if i < 0 {
			targetStable = false
			break
		}
		if st, _, _ := ins.columnStability(i, parts, d); !st.Stable {
			targetStable = false
			break
		}
	}
	if targetStable {
		return false, nil
	}
	keys, own, found := rc.tableKeys(n, ins.table, d)
	if !found || keys.unsure {
		return true, nil // a table mqb cannot see in full may have one
	}
	inserted := lowerSet(ins.columns)
	for _, u := range keys.uniques {
		if sameColumnSet(u, ins.targets) {
			continue // the target: bound per delivery or not written
		}
		if keys.repeatHits(u, inserted, d) {
			return true, nil
		}
	}
	return false, rc.repeatInsertablePremise(n, ins, keys, own, ins.targets)
}

// proveUpsert proves an INSERT with conflict handling: its key bound to
// stable values in every VALUES row, its update convergent, and a unique
// index on the key (read from create_table, else a premise).
func (rc *routeCtx) proveUpsert(n *nodeInfo, ins *sqlInsert, parts []partInfo, d sqlDialect) sinkProof {
	var p sinkProof
	notIdempotent := func(reason, missing string) sinkProof {
		p.reasons = []string{"write: " + ins.clause + ", but " + reason}
		p.missing = "sink write is not idempotent: " + missing
		return p
	}
	rowNote := func(r int) string {
		if len(ins.rows) == 1 {
			return ""
		}
		return fmt.Sprintf(" in VALUES row %d", r+1)
	}
	// The key: the conflict target, or (naming no columns) whichever
	// unique index the table has, which must lie among the stable columns.
	var keyCols, keyShown []string
	var stableCols []string
	if ins.kind == conflictColumns {
		for _, col := range ins.targets {
			i := indexOf(ins.columns, col)
			if i < 0 {
				p.reasons = []string{"write: " + ins.clause + ", but its conflict target is not in the column list"}
				p.missing = fmt.Sprintf("sink write is not proven idempotent: conflict column %s of %s is not in the insert's column list", col, ins.clause)
				return p
			}
			st, v, r := ins.columnStability(i, parts, d)
			shown := sqlText(v, parts)
			if !st.Stable {
				p.reasons = []string{fmt.Sprintf("write: %s, but its key %s = %s%s is per-delivery (%s)", ins.clause, col, shown, rowNote(r), st.Why)}
				p.missing = fmt.Sprintf("sink write is not idempotent: %s targets column %s, bound to %s%s, which is per-delivery (%s)", ins.clause, col, shown, rowNote(r), st.Why)
				return p
			}
			keyCols = append(keyCols, ins.columns[i])
			keyShown = append(keyShown, fmt.Sprintf("%s = %s (stable)", col, ins.valuesShown(i, parts)))
		}
		stableCols = keyCols
	} else {
		var firstBad string
		for i, col := range ins.columns {
			st, v, r := ins.columnStability(i, parts, d)
			if st.Stable {
				stableCols = append(stableCols, col)
			} else if firstBad == "" {
				firstBad = fmt.Sprintf("%s = %s%s is per-delivery (%s)", col, sqlText(v, parts), rowNote(r), st.Why)
			}
		}
		if len(stableCols) == 0 {
			return notIdempotent("no column is bound to a stable value",
				fmt.Sprintf("%s names no columns, so it needs a unique key among the columns bound to stable values, and there is none: %s", ins.clause, firstBad))
		}
	}
	p.keyed = ins.kind == conflictColumns
	// The update: convergent, and ordered when records of one key can
	// overtake each other.
	var updateNote string
	if ins.update {
		if ok, why := ins.convergence(parts, d); !ok {
			return notIdempotent(why, fmt.Sprintf("%s is not convergent: %s", ins.clause, why))
		}
		guard, guarded := ins.versionGuard(parts, d)
		if ins.where != nil && !guarded {
			why := fmt.Sprintf("cannot prove: DO UPDATE … WHERE %s is not a version guard (WHERE excluded.v > %s.v)", sqlText(ins.where, parts), ins.table)
			return notIdempotent(why, why)
		}
		if guarded && rc.concurrency > 1 {
			if why := ins.tyingVersion(guard, parts, rc.concurrency); why != "" {
				return notIdempotent(why, why)
			}
		}
		if rc.concurrency > 1 && !guarded {
			fix := fmt.Sprintf("add a version guard (WHERE excluded.v > %s.v) or set concurrency = 1", ins.table)
			if d == sqlMySQL || ins.kind == conflictAnyKey {
				fix = "set concurrency = 1"
			}
			why := fmt.Sprintf("with concurrency %d records of one key can be applied out of order, so a replay of an older record can overwrite a newer one; %s", rc.concurrency, fix)
			return notIdempotent(why, why)
		}
		if why := rc.reorderingSource(ins.table); why != "" && !guarded {
			return notIdempotent(why, why)
		}
		updateNote = "update converges: each SET writes the value the INSERT writes"
		if guarded {
			updateNote += fmt.Sprintf(", guarded by version column %s", guard)
		}
	}
	if ins.replace {
		for i, col := range ins.columns {
			if st, v, r := ins.columnStability(i, parts, d); !st.Stable {
				why := fmt.Sprintf("%s writes the whole row anew, and %s = %s%s is per-delivery (%s), so a replay changes the row", ins.clause, col, sqlText(v, parts), rowNote(r), st.Why)
				return notIdempotent(why, why)
			}
		}
		if rc.concurrency > 1 {
			why := fmt.Sprintf("with concurrency %d records of one key can be applied out of order, so a replayed %s of an older record can overwrite a newer one; set concurrency = 1", rc.concurrency, ins.clause)
			return notIdempotent(why, why)
		}
		if why := rc.reorderingSource(""); why != "" {
			return notIdempotent(why, why)
		}
	}
	// The unique index the conflict handling relies on.
	needPremise := true
	// replaceKnown: every column of the table, with its DEFAULT and
	// whether the database fills it, is read from this sink's own
	// create_table, which makes the table (no IF NOT EXISTS). Otherwise a
	// REPLACE rests on a premise about the columns it leaves out.
	replaceKnown := false
	if keys, own, found := rc.tableKeys(n, ins.table, d); found && !keys.unsure {
		{
			var usable []string
			for _, u := range keys.uniques {
				if ins.kind == conflictColumns && sameColumnSet(u, keyCols) || ins.kind != conflictColumns && subsetOf(u, stableCols) {
					usable = u
					break
				}
			}
			if usable == nil {
				if ins.kind == conflictColumns {
					why := fmt.Sprintf("create_table declares no UNIQUE or PRIMARY KEY index on exactly (%s), so the database rejects the conflict target", strings.Join(keyCols, ", "))
					return notIdempotent(why, why)
				}
				why := fmt.Sprintf("create_table gives %s no UNIQUE or PRIMARY KEY index among the columns bound to stable values (%s)%s, so a replay lands as a second row",
					ins.table, strings.Join(stableCols, ", "), autoincNote(keys, stableCols))
				return notIdempotent(why, why)
			}
			if why := ins.updatesOtherUnique(keys, usable); why != "" {
				return notIdempotent(why, why)
			}
			if ins.replace {
				for _, c := range slices.Sorted(maps.Keys(keys.autoinc)) {
					if indexOf(ins.columns, c) < 0 {
						why := fmt.Sprintf("%s deletes the row and inserts it anew, so its auto-increment column %s changes on a replay", ins.clause, c)
						return notIdempotent(why, why)
					}
				}
				for _, c := range slices.Sorted(maps.Keys(keys.unfilledIntegerKey)) {
					if indexOf(ins.columns, c) < 0 {
						why := fmt.Sprintf("%s deletes the row and inserts it anew, and leaves out its INTEGER PRIMARY KEY column %s, which the database does not number (no AUTO_INCREMENT, or not SQLite's rowid), so mqb cannot tell what a replay gives it; write the column from a stable value or use ON CONFLICT DO NOTHING", ins.clause, c)
						return notIdempotent(why, why)
					}
				}
				for _, c := range slices.Sorted(maps.Keys(keys.volatileDefaults)) {
					if indexOf(ins.columns, c) < 0 {
						why := fmt.Sprintf("%s deletes the row and inserts it anew, and column %s, which it leaves out, gets its DEFAULT %s again, which is not a literal, so a replay can change the row; write the column from a stable value or use ON CONFLICT DO NOTHING", ins.clause, c, keys.volatileDefaults[c])
						return notIdempotent(why, why)
					}
				}
			}
			if ins.kind != conflictColumns {
				keyCols = usable
				for _, c := range usable {
					i := indexOf(ins.columns, c)
					keyShown = append(keyShown, fmt.Sprintf("%s = %s (stable)", c, ins.valuesShown(i, parts)))
				}
			}
			keyShown = append(keyShown, fmt.Sprintf("create_table declares a unique index on (%s)", strings.Join(usable, ", ")))
			// CREATE TABLE IF NOT EXISTS keeps a table already there as it
			// is, and another endpoint's create_table may not have run
			// first, so the index is then still checked at start-up.
			needPremise = keys.ifNotExists || !own
			replaceKnown = !needPremise
		}
	}
	write := "write: " + ins.clause
	p.ok = true
	p.absorbs, p.absorbClause = ins.firstWinsKeys(keyCols, parts), ins.clause
	if !rc.inNamedUnused {
		for _, c := range keyCols {
			i := indexOf(ins.columns, c)
			if proc := ins.columnProcess(i, parts, d); proc.Process != "" {
				rc.warnProcessWriteKey(fmt.Sprintf("%s key %s = %s", ins.clause, c, ins.valuesShown(i, parts)), proc, n.attrs["insert_query"].rng)
				break
			}
		}
	}
	switch {
	case len(keyShown) > 0:
		p.reasons = []string{write, "key: " + strings.Join(keyShown, ", ")}
	default:
		p.reasons = []string{write, fmt.Sprintf("key: a UNIQUE or PRIMARY KEY index on columns among those bound to stable values (%s), a premise checked at start-up", strings.Join(stableCols, ", "))}
	}
	if updateNote != "" {
		p.reasons = append(p.reasons, updateNote)
	}
	if needPremise {
		cols := stableCols
		if ins.kind == conflictColumns {
			cols = keyCols
		}
		p.premises = append(p.premises, premiseAt{node: n, p: plan.Premise{
			Kind: plan.PremiseUniqueKey, When: plan.CheckStartup, Target: ins.table, Columns: cols,
			Holds:  fmt.Sprintf("table %s has a UNIQUE or PRIMARY KEY index on columns among (%s)", ins.table, strings.Join(cols, ", ")),
			Reason: write,
		}})
	}
	if ins.update && needPremise {
		// The table may hold unique indexes create_table does not show:
		// the update must not move a column of one (updatesOtherUnique).
		if moved := ins.movedColumns(); len(moved) > 0 {
			var key []string
			holds := fmt.Sprintf("no UNIQUE or PRIMARY KEY index of table %s holds a column the update sets (%s), unless it is the table's only unique index", ins.table, strings.Join(moved, ", "))
			if ins.kind == conflictColumns {
				key = keyCols
				holds = fmt.Sprintf("no UNIQUE or PRIMARY KEY index of table %s holds a column the update sets (%s), except the conflict key (%s)", ins.table, strings.Join(moved, ", "), strings.Join(keyCols, ", "))
			}
			p.premises = append(p.premises, premiseAt{node: n, p: plan.Premise{
				Kind: plan.PremiseUpdateLeavesUniques, When: plan.CheckStartup, Target: ins.table, Columns: moved, Key: key,
				Holds: holds, Reason: write,
			}})
		}
	}
	if ins.replace && !replaceKnown && d != sqlPostgres {
		p.premises = append(p.premises, rc.replacePremise(n, ins, write))
		p.reasons = append(p.reasons, fmt.Sprintf("row: %s writes the whole row anew, so the columns it leaves out must come back the same: a premise checked at start-up", ins.clause))
	}
	var present []string
	for _, c := range keyCols {
		if ins.usesPayload(indexOf(ins.columns, c), parts) {
			present = append(present, c)
		}
	}
	if len(present) > 0 {
		p.premises = append(p.premises, premiseAt{node: n, p: plan.Premise{
			Kind: plan.PremiseKeyPresent, When: plan.CheckPerRecord, Target: ins.table, Columns: present,
			Holds:  fmt.Sprintf("every record has a non-null value for key column(s) %s (NULL never conflicts, so a replay would land again)", strings.Join(present, ", ")),
			Reason: write,
		}})
	}
	if !rc.outbox {
		p.premises = append(p.premises, noTriggersPremise(n, ins.table, d, write))
	}
	return p
}

// noTriggersPremise is the start-up premise that the write is the only
// effect of a write to table: the proof shows that the row absorbs a
// replay, not what a trigger does, and a replay can fire one again (a
// BEFORE INSERT or statement trigger on every delivery, an UPDATE trigger
// on every DO UPDATE). Under the transactional outbox a trigger commits
// with the position, once, so that proof needs no such premise.
func noTriggersPremise(n *nodeInfo, table string, d sqlDialect, reason string) premiseAt {
	what := "trigger"
	if d == sqlPostgres {
		what = "trigger (but the internal ones behind foreign keys) and no rule, on it or a partition of it"
	}
	return premiseAt{node: n, p: plan.Premise{
		Kind: plan.PremiseNoTriggers, When: plan.CheckStartup, Target: table,
		Holds:  fmt.Sprintf("table %s has no %s: a replay can fire a trigger again, and what it does is not the row the write absorbs", table, what),
		Reason: reason,
	}}
}

// firstWinsKeys lists the placeholder expressions whose repeats the write
// absorbs while keeping the first row as it is and absorbing nothing else:
// ON CONFLICT (k) DO NOTHING on a single VALUES row, with k one column
// bound to that expression alone. INSERT OR IGNORE and INSERT IGNORE are
// not among them: they also swallow a NOT NULL or CHECK failure (SQLite
// skips the row, MySQL stores a default), which a dedup does not do.
func (ins *sqlInsert) firstWinsKeys(keyCols []string, parts []partInfo) []string {
	if len(ins.rows) != 1 || ins.update || ins.replace || ins.kind != conflictColumns || len(keyCols) != 1 {
		return nil
	}
	i := indexOf(ins.columns, keyCols[0])
	if i < 0 {
		return nil
	}
	if e := ins.rows[0][i]; e.kind == eParam && e.num < len(parts) && parts[e.num].isExpr {
		return []string{parts[e.num].expr}
	}
	return nil
}

func sameColumnSet(a, b []string) bool {
	return len(a) == len(b) && subsetOf(a, b)
}

func subsetOf(a, b []string) bool {
	for _, x := range a {
		if indexOf(b, x) < 0 {
			return false
		}
	}
	return true
}

// autoincNote names the table's keys that the database fills itself.
func autoincNote(keys *sqlTableKeys, stable []string) string {
	var auto []string
	for _, u := range keys.uniques {
		for _, c := range u {
			if keys.autoinc[strings.ToLower(c)] && indexOf(stable, c) < 0 {
				auto = append(auto, c)
			}
		}
	}
	if len(auto) == 0 {
		return ""
	}
	return fmt.Sprintf(" (its key %s is auto-increment, filled anew by every write)", strings.Join(auto, ", "))
}

func (rc *routeCtx) proveMongo(n *nodeInfo) sinkProof {
	var p sinkProof
	idf := n.attrs["id_field"]
	switch {
	case idf == nil:
		p.reasons = []string{"write: mongodb without id_field gives every insert a fresh _id"}
		p.missing = "sink write is not idempotent: mongodb without id_field gives every insert a fresh _id; set id_field = \"order_id\""
	case idf.val.Type == plan.TTemplate:
		shown := templateText(idf.val.Template)
		if idf.stab.Stable {
			p.ok = true
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s becomes _id (stable); a repeat hits the unique _id index", shown)}
		} else {
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s is per-delivery: %s", shown, idf.stab.Why)}
			p.missing = fmt.Sprintf("mongodb id_field %s is per-delivery: %s", shown, idf.stab.Why)
		}
	default:
		field := idf.val.Str
		st := rc.payloadRead([]string{field})
		if st.Stable {
			p.ok = true
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s, _id = payload.%s (stable); a repeat hits the unique _id index", field, field)}
		} else {
			p.reasons = []string{fmt.Sprintf("write: mongodb id_field %s is per-delivery: %s", field, st.Why)}
			p.missing = fmt.Sprintf("mongodb id_field %s is per-delivery: %s", field, st.Why)
		}
	}
	if p.ok && !rc.inNamedUnused {
		proc, what := idf.stab, "mongodb id_field "+templateOrStr(idf)
		if idf.val.Type != plan.TTemplate {
			proc = rc.payloadRead([]string{idf.val.Str})
			what += ", _id = payload." + idf.val.Str
		}
		if proc.Stable && proc.Process != "" {
			rc.warnProcessWriteKey(what, proc, idf.rng)
		}
	}
	if p.ok {
		// The proof rests on the unique _id index (MongoDB keeps one on
		// every collection, so the start-up check always passes, but the
		// plan says what the verdict assumes) and on every record having
		// the key: one without it is dead-lettered, never written under a
		// fresh _id.
		target := templateOrStr(n.attrs["database"]) + "." + templateOrStr(n.attrs["collection"])
		key := "payload." + idf.val.Str
		if idf.val.Type == plan.TTemplate {
			key = templateText(idf.val.Template)
		}
		p.premises = append(p.premises,
			premiseAt{node: n, p: plan.Premise{Kind: plan.PremiseUniqueIndex, When: plan.CheckStartup, Target: target, Columns: []string{"_id"},
				Holds:  fmt.Sprintf("collection %s has a unique index on (_id), as every MongoDB collection has", target),
				Reason: p.reasons[0]}},
			premiseAt{node: n, p: plan.Premise{Kind: plan.PremiseKeyPresent, When: plan.CheckPerRecord, Target: target, Columns: []string{key},
				Holds:  fmt.Sprintf("every record has a non-empty, non-null id_field %s (one without it would get a fresh _id, so a replay would land again)", key),
				Reason: p.reasons[0]}})
	}
	if !rc.inNamedUnused && boolAttr(n, "report_outcome") {
		if !p.ok {
			rc.c.add("E043", n.attrs["report_outcome"].rng, fmt.Sprintf("mongodb report_outcome in route %s has no deterministic key", rc.name),
				"Set id_field to a stable field: without a deterministic _id there is no duplicate to detect, so the outcome would always be `inserted`.")
		}
		if boolAttr(n, "request_reply") {
			rc.c.add("E044", n.attrs["request_reply"].rng, fmt.Sprintf("mongodb in route %s sets both report_outcome and request_reply", rc.name),
				"request_reply switches the publisher to the reply-polling path, which never reports an outcome: drop request_reply.")
		}
	}
	return p
}

func (rc *routeCtx) proveClickHouse(n *nodeInfo) sinkProof {
	table := ""
	if t := n.attrs["table"]; t != nil {
		table = t.val.Str
	}
	var p sinkProof
	premise := plan.Premise{Kind: plan.PremiseReplacingMergeTree, When: plan.CheckStartup, Target: table}
	if cols := n.attrs["columns"]; cols != nil && cols.val.Type == plan.TBlock && len(cols.val.Block) > 0 {
		names := make([]string, 0, len(cols.val.Block))
		for k := range cols.val.Block {
			names = append(names, k)
		}
		sort.Strings(names)
		var stable, perDelivery []string
		warned := rc.inNamedUnused
		for _, k := range names {
			v := cols.val.Block[k]
			if (v.Type == plan.TExpr || v.Type == plan.TTemplate) && !v.Stable {
				perDelivery = append(perDelivery, k)
			} else {
				stable = append(stable, k)
				// A stable column may be in the sorting key, which is
				// the key the write is addressed by.
				if proc := rc.blockValueProcess(v); proc.Process != "" && !warned {
					warned = true
					rc.warnProcessWriteKey(fmt.Sprintf("clickhouse table %s column %s = %s (the ReplacingMergeTree sorting key may include it)", table, k, v.Expr), proc, rc.exprRange(v, cols.rng))
				}
			}
		}
		if len(stable) == 0 {
			p.reasons = []string{fmt.Sprintf("write: clickhouse table %s, but every column is bound to a per-delivery value (%s)", table, strings.Join(perDelivery, ", "))}
			p.missing = fmt.Sprintf("sink write is not idempotent: no column written to clickhouse table %s is bound to a stable value, so no sorting key can collapse a replay", table)
			return p
		}
		premise.Columns = stable
		premise.Holds = fmt.Sprintf("table %s is a ReplacingMergeTree whose sorting key columns are all among (%s)", table, strings.Join(stable, ", "))
		if len(perDelivery) > 0 {
			premise.Holds += fmt.Sprintf(", not the per-delivery %s", strings.Join(perDelivery, ", "))
		}
	} else {
		// The payload's top-level fields, one per column of the table: the
		// sorting key is some of them, which mqb cannot name at build time.
		replaced := rc.replaced
		if replaced == "" && !rc.taint.base.Stable {
			replaced = rc.taint.base.Why
		}
		if replaced != "" {
			p.reasons = []string{fmt.Sprintf("write: clickhouse table %s gets the payload's fields, but %s", table, replaced)}
			p.missing = fmt.Sprintf("sink write is not idempotent: clickhouse table %s gets the payload's fields and %s, so its sorting key may be per-delivery", table, replaced)
			return p
		}
		var tainted []string
		for _, f := range rc.taint.topFields() {
			if !rc.taint.read([]string{f}).Stable {
				tainted = append(tainted, f)
			}
		}
		sort.Strings(tainted)
		if len(tainted) > 0 {
			p.reasons = []string{fmt.Sprintf("write: clickhouse table %s gets the payload's top-level fields, and map sets %s from a per-delivery value", table, strings.Join(tainted, ", "))}
			p.missing = fmt.Sprintf("sink write is not proven idempotent: clickhouse table %s gets the payload's fields, map sets payload.%s from a per-delivery value (%s), and mqb cannot see at build time whether the sorting key includes it; name the columns in a columns block",
				table, tainted[0], rc.taint.read(tainted[:1]).Why)
			return p
		}
		premise.Holds = fmt.Sprintf("table %s is a ReplacingMergeTree (its columns, sorting key included, are written from the payload's top-level fields, all stable)", table)
		if !rc.inNamedUnused {
			rng := n.rng
			if t := n.attrs["table"]; t != nil {
				rng = t.rng
			}
			if base := rc.taint.base; base.Process != "" {
				rc.warnProcessWriteKey(fmt.Sprintf("clickhouse table %s columns, written from the payload a map step replaced (the ReplacingMergeTree sorting key is among them)", table), base, rng)
			} else {
				for _, f := range slices.Sorted(slices.Values(rc.taint.topFields())) {
					if st := rc.taint.read([]string{f}); st.Stable && st.Process != "" {
						rc.warnProcessWriteKey(fmt.Sprintf("clickhouse table %s column %s = payload.%s (the ReplacingMergeTree sorting key may include it)", table, f, f), st, rng)
						break
					}
				}
			}
		}
	}
	if rc.concurrency > 1 {
		// Repeats of one key collapse to the highest version, or without
		// one to the last inserted: out of order, that is an older record.
		v := n.attrs["version"]
		if v == nil || !v.stab.Stable {
			why := "no version"
			if v != nil {
				why = fmt.Sprintf("a per-delivery version (%s)", v.stab.Why)
			}
			p.reasons = []string{fmt.Sprintf("write: clickhouse table %s, but with concurrency %d and %s a replayed older record can replace a newer one", table, rc.concurrency, why)}
			p.missing = fmt.Sprintf("sink write is not idempotent: with concurrency %d records of one key can land in clickhouse table %s out of order, and with %s ReplacingMergeTree keeps whichever came last; set version to a stable, increasing value or concurrency = 1", rc.concurrency, table, why)
			return p
		}
		// Equal versions are kept by which came last, too: the commit
		// LSN ties every change of one transaction.
		if v.val.Type == plan.TExpr && strings.Contains(v.val.Expr, "postgres.lsn") {
			p.reasons = []string{fmt.Sprintf("write: clickhouse table %s, but with concurrency %d and version %s, the commit LSN every change of one transaction shares, two changes of one key in one transaction tie and ReplacingMergeTree keeps whichever came last", table, rc.concurrency, v.val.Expr)}
			p.missing = fmt.Sprintf("sink write is not idempotent: version %s is the commit LSN every change of one transaction shares: two changes of one key in one transaction tie, and with concurrency %d ReplacingMergeTree keeps whichever landed last, which a replay can change; set concurrency = 1", v.val.Expr, rc.concurrency)
			return p
		}
	}
	if v := n.attrs["version"]; v == nil || !v.stab.Stable {
		// Without a stable version the row inserted last is kept, which
		// is the newest record only when a replay comes in read order.
		if why := rc.redeliversOutOfOrder(); why != "" {
			what := "no version"
			if v != nil {
				what = fmt.Sprintf("a per-delivery version (%s)", v.stab.Why)
			}
			p.reasons = []string{fmt.Sprintf("write: clickhouse table %s, but with %s a replayed older record can replace a newer one: %s", table, what, why)}
			p.missing = fmt.Sprintf("sink write is not idempotent: %s, and with %s ReplacingMergeTree keeps whichever record of a key came last, which after a crash can be an older one; set version to a stable, increasing value (a sequence number of the record)", why, what)
			return p
		}
	}
	premise.Reason = fmt.Sprintf("write: clickhouse table %s", table)
	p.ok = true
	p.reasons = []string{fmt.Sprintf("write: clickhouse table %s, effectively-once given the premise that %s (checked at start-up); repeats collapse at merge time, so read with FINAL", table, premise.Holds)}
	p.premises = []premiseAt{{node: n, p: premise}, {node: n, p: plan.Premise{
		Kind: plan.PremiseNoTriggers, When: plan.CheckStartup, Target: table,
		Holds:  fmt.Sprintf("no materialized view reads table %s: each block inserted into it, a replay's too, goes through the view into the view's own table, which keeps the repeat", table),
		Reason: premise.Reason,
	}}}
	return p
}

// redeliversOutOfOrder says why the route's source can deliver a record
// again after newer ones of the same stream (a sink that keeps the last
// write then keeps an older record), or "" when a replay after a crash
// comes in read order. JetStream redelivers a message left unacked only
// after ack_wait, behind the newer messages the restarted consumer gets
// at once.
//
// Only a source with a replayable position (read again in order from the
// committed one) is known to come in read order; any other may not (AMQP
// and MQTT redeliver on their own schedule too).
func (rc *routeCtx) redeliversOutOfOrder() string {
	switch {
	case rc.src == nil || rc.src.HasPosition(rc.srcMode):
		return ""
	case rc.src.Name == "nats" && !rc.coreNATS():
		return "the nats source redelivers a message a crash left unacknowledged after ack_wait, behind newer messages"
	default:
		return fmt.Sprintf("the %s source has no position to replay from: it redelivers a message a crash left unacknowledged on its own schedule, after what it delivers meanwhile", rc.src.Name)
	}
}

// insertMayHitUniqueKey reports whether a plain INSERT's repeat can fail on
// a unique key: true unless create_table shows the whole table and no
// unique key of it refuses the repeat (repeatHits). When the table may
// already exist with other keys (IF NOT EXISTS, or a create_table not of
// this endpoint), the answer "cannot fail" rests on the premise it returns.
func (rc *routeCtx) insertMayHitUniqueKey(n *nodeInfo, ins *sqlInsert, d sqlDialect) (bool, []premiseAt) {
	keys, own, found := rc.tableKeys(n, ins.table, d)
	if !found || keys.unsure {
		return true, nil // a table mqb cannot see in full may have one
	}
	inserted := lowerSet(ins.columns)
	for _, u := range keys.uniques {
		if keys.repeatHits(u, inserted, d) {
			return true, nil
		}
	}
	return false, rc.repeatInsertablePremise(n, ins, keys, own, nil)
}

// repeatHits reports whether unique key u can refuse the repeat of an
// insert into the inserted columns (lower-case names): unless a column of
// u that the insert leaves out gets a new value on every insert (an
// auto-increment, identity or sequence) or is NULL where NULLs are
// distinct (SQLite, MySQL and MariaDB, PostgreSQL without NULLS NOT
// DISTINCT, which makes the table unsure), the repeat writes the same
// values into u: an inserted column may be bound to the same value again
// (even a per-delivery one can repeat), and a left-out column gets its
// DEFAULT again, a literal one surely and a computed one
// (CURRENT_TIMESTAMP) possibly.
func (keys *sqlTableKeys) repeatHits(u []string, inserted map[string]bool, d sqlDialect) bool {
	nullsDistinct := d == sqlSQLite || d == sqlPostgres || d == sqlMySQL
	for _, c := range u {
		lc := strings.ToLower(c)
		if inserted[lc] {
			continue
		}
		if keys.autoinc[lc] || nullsDistinct && keys.nullWhenOmitted[lc] {
			return false
		}
	}
	return len(u) > 0
}

// repeatInsertablePremise is the start-up premise behind "a repeat of the
// insert cannot fail on a unique key" when create_table shows the table
// but the table may already exist with other unique keys (CREATE TABLE IF
// NOT EXISTS keeps one that is there; another endpoint's create_table may
// not have run first). key is the conflict target a clause handles, whose
// own index the premise leaves aside; nil for a plain INSERT.
func (rc *routeCtx) repeatInsertablePremise(n *nodeInfo, ins *sqlInsert, keys *sqlTableKeys, own bool, key []string) []premiseAt {
	if own && !keys.ifNotExists {
		return nil
	}
	holds := fmt.Sprintf("table %s has no unique index or constraint a repeat of the insert into columns (%s) conflicts on: each has a column outside them that is auto-increment (identity, serial) or nullable with no default",
		ins.table, strings.Join(ins.columns, ", "))
	what := fmt.Sprintf("plain INSERT into %s", ins.table)
	if len(key) > 0 {
		holds = fmt.Sprintf("table %s has no unique index or constraint, but one on the conflict target (%s), that a repeat of the insert into columns (%s) conflicts on: each has a column outside them that is auto-increment (identity, serial) or nullable with no default",
			ins.table, strings.Join(key, ", "), strings.Join(ins.columns, ", "))
		what = ins.clause + " into " + ins.table
	}
	return []premiseAt{{node: n, p: plan.Premise{
		Kind: plan.PremiseRepeatInsertable, When: plan.CheckStartup, Target: ins.table, Columns: slices.Clone(ins.columns), Key: slices.Clone(key),
		Holds:  holds,
		Reason: fmt.Sprintf("handler: a replay of its %s does not fail on a unique key, so a record replayed after a crash reaches the sink", what),
	}}}
}

func lowerSet(cols []string) map[string]bool {
	m := make(map[string]bool, len(cols))
	for _, c := range cols {
		m[strings.ToLower(c)] = true
	}
	return m
}

// replacePremise is the start-up premise of a REPLACE into a table whose
// columns the file does not show in full: REPLACE deletes the row and
// inserts it anew, so a column it leaves out gets its DEFAULT again, and a
// key the database fills gets a new value, on every replay. The proof
// holds only when every such column comes back the same: a literal
// DEFAULT (or none), never an auto-increment key or a DEFAULT the database
// computes.
func (rc *routeCtx) replacePremise(n *nodeInfo, ins *sqlInsert, reason string) premiseAt {
	return premiseAt{node: n, p: plan.Premise{
		Kind: plan.PremiseReplaceStableColumns, When: plan.CheckStartup, Target: ins.table, Columns: slices.Clone(ins.columns),
		Holds: fmt.Sprintf("every column of table %s that %s leaves out (it writes %s) has a literal DEFAULT or none, and none is filled by the database (auto-increment, rowid)",
			ins.table, ins.clause, strings.Join(ins.columns, ", ")),
		Reason: reason,
	}}
}

// blockValueProcess is the stability of a stable value of a block attribute (a
// clickhouse column), whose Process says what it rests on outside the record (env("X"), the local time
// zone), as stabilityOf says it for an attribute of its own: the block
// keeps one stability for all its values. The expression compiled when the
// attribute was checked, so checking it again reports nothing new; any
// diagnostic the walk repeats is dropped.
func (rc *routeCtx) blockValueProcess(v plan.Value) stability {
	if v.Type != plan.TExpr || !v.Stable {
		return stability{}
	}
	tree, err := rc.c.exprs.check(v.Expr, false)
	if err != nil {
		return stability{}
	}
	n, reads := len(rc.c.diags), rc.readsSrcMeta
	st := rc.stabilityOf(&compiledExpr{src: v.Expr, tree: tree, at: v.Pos})
	rc.c.diags, rc.readsSrcMeta = rc.c.diags[:n], reads || rc.readsSrcMeta
	if !st.Stable {
		return stability{}
	}
	return st
}

// exprRange is the range of an expression value in the file: its text, or
// the string literal a template was written as; whole when neither is
// found at its position.
func (rc *routeCtx) exprRange(v plan.Value, whole diag.Range) diag.Range {
	src := rc.file.Src
	at := v.Pos
	if !at.IsValid() || at.Offset < 0 || at.Offset >= len(src) {
		return whole
	}
	rest := string(src[at.Offset:])
	n := 0
	switch {
	case strings.HasPrefix(rest, v.Expr) && v.Expr != "":
		n = len(v.Expr)
	case rest[0] == '"':
		for i := 1; i < len(rest) && rest[i] != '\n'; i++ {
			if rest[i] == '\\' {
				i++
				continue
			}
			if rest[i] == '"' {
				n = i + 1
				break
			}
		}
	}
	if n == 0 || strings.Contains(rest[:n], "\n") {
		return whole
	}
	return diag.Range{Start: at, End: advance(at, rest, n)}
}

// movedColumns are the columns the update sets to anything but
// themselves.
func (ins *sqlInsert) movedColumns() []string {
	var moved []string
	for _, s := range ins.sets {
		if !ins.isExistingColumn(s.val, s.col) && !slices.Contains(moved, s.col) {
			moved = append(moved, s.col)
		}
	}
	return moved
}

// updatesOtherUnique says why a DO UPDATE (ON DUPLICATE KEY UPDATE) that
// moves a row's value in a unique index other than the one the conflict
// handling uses (key) is not idempotent, or "". Such an update decides
// which later records that index refuses: a record refused (dead-lettered)
// because a row held its value is inserted when it is replayed after the
// update moved that row away, and a record inserted first can be refused
// on a replay. Which records land then depends on where the replay began,
// not only on the records.
func (ins *sqlInsert) updatesOtherUnique(keys *sqlTableKeys, key []string) string {
	if !ins.update {
		return ""
	}
	// ON DUPLICATE KEY UPDATE names no key: with a second unique index
	// beside the one the proof chose, a row can collide on either, so a
	// SET moving a column of any of them counts.
	anyKey := ins.kind != conflictColumns && slices.ContainsFunc(keys.uniques, func(u []string) bool { return !subsetOf(key, u) })
	for _, s := range ins.sets {
		if ins.isExistingColumn(s.val, s.col) {
			continue // col = col moves nothing
		}
		for _, u := range keys.uniques {
			if indexOf(u, s.col) < 0 || subsetOf(key, u) && !anyKey {
				// An index over the key's columns and more can never
				// refuse a row the key lets in.
				continue
			}
			return fmt.Sprintf("SET %s moves the row's value in the unique index on (%s), beside the key (%s) %s is proven on: whether a later record collides on that index depends on what the rows hold when it is written, so a record refused (or merged) because a row held its value lands anew when it is replayed after the row moved away",
				s.col, strings.Join(u, ", "), strings.Join(key, ", "), ins.clause)
		}
	}
	return ""
}

// reorderingSource says why the route's source can hand a record over
// again after newer records ("" when it cannot): one without a replayable
// position (a broker that acks each message, as NATS JetStream, AMQP or
// Redis streams do) redelivers what a crash left unacknowledged on its
// own schedule, after what it delivers meanwhile, so a replayed older
// record of a key can land after a newer one, as under concurrency > 1
// (soundness seed 3281: nats, batch_size 1, DO UPDATE left an older
// record's row). A write whose outcome depends on the order of a key's
// records (a DO UPDATE without a version guard, a REPLACE) is then not
// idempotent. table names the guard's table ("" for none to suggest).
func (rc *routeCtx) reorderingSource(table string) string {
	why := rc.redeliversOutOfOrder()
	if why == "" {
		return ""
	}
	fix := "add a version guard (WHERE excluded.v > " + table + ".v) on a stable, increasing column"
	if table == "" {
		fix = "read a source that replays in order, or write with ON CONFLICT DO UPDATE and a version guard"
	}
	return why + ", so a replayed older record of a key can overwrite a newer one; " + fix
}

// rerunUnsafeDDL returns the first statement of a create_table script
// that is not safe to run again on every start, shortened, or "": only
// CREATE … IF NOT EXISTS (never OR REPLACE) is. A script mqb cannot read
// is left to the database.
func rerunUnsafeDDL(ddl string, d sqlDialect) string {
	if strings.ContainsAny(ddl, "\x01\x02") {
		return ""
	}
	toks, err := lexSQL(ddl, d)
	if err != nil {
		return ""
	}
	var stmt []sqlTok
	for _, t := range toks {
		if !t.punct(";") && t.kind != tEOF {
			stmt = append(stmt, t)
			continue
		}
		if len(stmt) > 0 && !createIfNotExists(stmt) {
			var words []string
			for _, w := range stmt[:min(len(stmt), 6)] {
				words = append(words, w.text)
			}
			text := strings.Join(words, " ")
			if len(stmt) > 6 {
				text += " …"
			}
			return "`" + text + "`"
		}
		stmt = stmt[:0]
	}
	return ""
}

// createIfNotExists: the statement is CREATE … IF NOT EXISTS, not CREATE
// OR REPLACE.
func createIfNotExists(s []sqlTok) bool {
	if !s[0].is("create") || len(s) > 2 && s[1].is("or") && s[2].is("replace") {
		return false
	}
	for i := 1; i+2 < len(s); i++ {
		if s[i].is("if") && s[i+1].is("not") && s[i+2].is("exists") {
			return true
		}
		if s[i].punct("(") {
			return false // past the name
		}
	}
	return false
}

// tyingVersion says why the version column a guard compares is not a
// version that orders every record of one key, or "": a column bound to
// meta["postgres.lsn"] holds the transaction's commit LSN, which every
// change of one transaction shares, so two changes of one key in one
// transaction tie, the guard lets through only the first to land, and
// with concurrency > 1 either can land first (any mention of the key in
// the column's value counts: an over-match only weakens the verdict).
func (ins *sqlInsert) tyingVersion(col string, parts []partInfo, concurrency int64) string {
	i := indexOf(ins.columns, col)
	if i < 0 {
		return ""
	}
	var walk func(e *sqlExpr) bool
	walk = func(e *sqlExpr) bool {
		if e.kind == eParam && e.num < len(parts) && strings.Contains(parts[e.num].expr, "postgres.lsn") {
			return true
		}
		return slices.ContainsFunc(e.args, walk)
	}
	for _, row := range ins.rows {
		if walk(row[i]) {
			return fmt.Sprintf("the version guard's column %s is bound to meta[\"postgres.lsn\"], the commit LSN every change of one transaction shares: two changes of one key in one transaction tie, and with concurrency %d either can be applied first and win, so a replay can leave another row than a clean run; set concurrency = 1", col, concurrency)
		}
	}
	return ""
}

// warnConflictTarget warns (W010) when ON CONFLICT (cols) names columns on
// which the table, as a create_table of this file declares it, has no
// UNIQUE or PRIMARY KEY index: the database then refuses the statement
// and every write fails. A warning, not an error: a table already there
// (CREATE TABLE IF NOT EXISTS keeps it as it is, or another tool made it)
// may have the index. It is checked apart from the proof, which stops at
// the first reason the write is not idempotent.
func (rc *routeCtx) warnConflictTarget(n *nodeInfo, ins *sqlInsert, rng diag.Range, d sqlDialect) {
	keys, own, found := rc.tableKeys(n, ins.table, d)
	if !found || keys.unsure {
		return
	}
	for _, u := range keys.uniques {
		if sameColumnSet(u, ins.targets) {
			return
		}
	}
	where := "this sink's create_table"
	if !own {
		where = "the create_table of this file that makes it"
	}
	refusal := `PostgreSQL: "there is no unique or exclusion constraint matching the ON CONFLICT specification"`
	if d == sqlSQLite {
		refusal = `SQLite: "ON CONFLICT clause does not match any PRIMARY KEY or UNIQUE constraint"`
	}
	rc.warn("W010", rng, fmt.Sprintf("insert_query into %s in route %s targets ON CONFLICT (%s), but %s declares no UNIQUE or PRIMARY KEY index on exactly those columns", ins.table, rc.name, strings.Join(ins.targets, ", "), where),
		fmt.Sprintf("The database refuses such a statement (%s), so every write of the route fails, unless the table is already there with that index. Declare the index in create_table (PRIMARY KEY, UNIQUE, or CREATE UNIQUE INDEX), or name the columns of an index the table has.", refusal))
}
