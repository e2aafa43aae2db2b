package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Explained is a difference between a route's clean and killed runs that
// its verdict allows, for a reason the checker can show (explainDLQ).
type Explained struct {
	Route string
	Text  string
}

// explainDLQ reports whether every difference between the clean run (ref)
// and a killed run (got) of route r, under an effectively-once verdict
// whose dead-letter file is compared as a set, is a record the clean run
// dead-lettered for a second unique column of a keyed table and the
// killed run did not; and says so for a person.
//
// Seed 26067: t2 (id TEXT PRIMARY KEY, qty INTEGER, x TEXT UNIQUE) written
// by INSERT … ON CONFLICT (id) DO UPDATE SET qty = excluded.qty, x = x. A
// record whose x another id holds is refused (UNIQUE constraint failed:
// t2.x) only while its own id has no row: SQLite applies the conflict
// target's update before it looks at x. In the clean run the record came
// before any row of its id and was dead-lettered; a later record of that
// id (x NULL, or free) inserted the row. A replay after a kill may reach
// the record when that later record's write is done but its position not
// committed: the record then updates the row and succeeds, and the later
// record, replayed in turn, writes the row again. The table ends as the
// clean run's; only the dead-letter file lacks the record.
//
// So a missing dead-lettered record is explained only when all of these
// hold, and any other difference leaves the verdict false:
//   - every group that is not a dead-letter file holds exactly what the
//     clean run's holds (no sink row missing, extra or different);
//   - the dead-letter file has no record the clean run's lacks;
//   - the generator declared a table of the route with a second unique
//     column (Artifact.OtherUnique), compared on every column, and the
//     clean run's dead-letter line gives as the record's reason that
//     column's unique constraint, and nothing else (not a NOT NULL, a
//     type, a key bound to NULL, a step's error);
//   - the record's payload binds the key column to a string, and the
//     clean run's table holds a row of that key: refused for x, the
//     record found no row of its key, so a record applied after it wrote
//     that row, and a replay could find it.
//
// What this cannot tell apart: a killed run that lost such a record
// (neither wrote nor dead-lettered it) leaves the same table and file.
// Records lost that way would show elsewhere too: one without a later
// record of its key, or any other reason, stays a false verdict.
func explainDLQ(r RouteShape, ref, got Snapshot) (string, bool) {
	kinds := map[string][]string{}
	for _, a := range r.Artifacts {
		kinds[a.Group] = append(kinds[a.Group], a.Kind)
	}
	var b strings.Builder
	missing := 0
	for _, g := range groups(ref.Full, got.Full) {
		a, z := ref.Full[g], got.Full[g]
		if ks := kinds[g]; len(ks) == 0 || slices.ContainsFunc(ks, func(k string) bool { return k != "dlq" }) {
			if !maps.Equal(a, z) {
				return "", false
			}
			continue
		}
		// A dead-letter file, compared as a set of records.
		var lines, whys []string
		for _, k := range keys(a, z) {
			switch {
			case a[k] > 0 && z[k] > 0:
				continue
			case a[k] == 0:
				return "", false // dead-lettered by this run only
			}
			why, key, ok := stateRefusal(r, ref, ref.DLQ[g][k])
			if !ok {
				return "", false
			}
			lines = append(lines, fmt.Sprintf("  - %s (%s)", k, key))
			whys = append(whys, why)
		}
		if len(lines) == 0 {
			continue
		}
		missing += len(lines)
		fmt.Fprintf(&b, "%s: %d record(s) the clean run dead-lettered and this run did not, explained:\n", g, len(lines))
		if distinct := slices.Compact(slices.Sorted(slices.Values(whys))); len(distinct) == 1 {
			fmt.Fprintf(&b, "  %s:\n%s\n", whys[0], strings.Join(clip(lines, 12), "\n"))
			continue
		}
		for i := range lines {
			lines[i] += ": " + whys[i]
		}
		fmt.Fprintf(&b, "%s\n", strings.Join(clip(lines, 12), "\n"))
	}
	if missing == 0 {
		return "", false
	}
	return b.String(), true
}

// stateRefusal says why the table's refusal of a dead-lettered record, e,
// depended on the rows it held (see explainDLQ), and which key the record
// has; ok is false when it cannot tell.
func stateRefusal(r RouteShape, ref Snapshot, e DLQEntry) (why, key string, ok bool) {
	if e.Payload == nil {
		return "", "", false
	}
	for _, a := range r.Artifacts {
		u := a.OtherUnique
		if a.Kind != "table" || u == nil || a.FirstWins || a.KeyOnly != "" || isServerPlaceholder(a.Path) ||
			slices.Contains(a.Volatile, u.Key) || slices.Contains(a.Volatile, u.Column) {
			continue
		}
		constraint := "UNIQUE constraint failed: " + a.Table + "." + u.Column
		if !refusedFor(e.Error, constraint) {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(e.Payload))
		d.UseNumber()
		var m map[string]any
		if d.Decode(&m) != nil {
			return "", "", false
		}
		v, isString := m[u.KeyField].(string)
		if !isString {
			return "", "", false
		}
		held := false
		for row := range ref.Full[a.Group] {
			if rowHolds(row, u.Key, strconv.Quote(v)) {
				held = true
				break
			}
		}
		if !held {
			return "", "", false
		}
		why = fmt.Sprintf("dead-lettered in the clean run for a unique %s taken by another %s (%s); "+
			"a later record of its %s inserted the row, the killed run applied it as an update of that row, "+
			"and %s equals the clean run's", u.Column, u.Key, constraint, u.Key, a.Table)
		return why, u.Key + " " + strconv.Quote(v), true
	}
	return "", "", false
}

// refusedFor reports whether a dead-letter reason is SQLite's refusal by
// constraint, on that one column (not a constraint over several columns,
// which SQLite lists as "t.a, t.b"), and nothing else.
func refusedFor(reason, constraint string) bool {
	rest, found := strings.CutPrefix(reason, "sql insert: ")
	if !found {
		return false
	}
	return rest == constraint
}

// rowHolds reports whether a table row, as readTable renders it
// ("id=\"k-1\" qty=3 x=NULL"), has column col equal to val (rendered).
// A rendered string's quotes are escaped, so a match cannot start inside
// another column's value.
func rowHolds(row, col, val string) bool {
	tok := col + "=" + val
	return row == tok || strings.HasPrefix(row, tok+" ") || strings.Contains(row, " "+tok+" ") || strings.HasSuffix(row, " "+tok)
}
