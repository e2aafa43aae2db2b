package main

import (
	"strings"
	"testing"
)

// explainDLQ accepts a dead-lettered record the killed run did not
// dead-letter only when the table refused it for a second unique column
// the generator declared, a row of its key is in the table, and every
// sink holds exactly the clean run's; every other difference stays a
// false verdict (the cases marked false are the ones that keep the
// checker from growing lenient).
func TestExplainDLQ(t *testing.T) {
	const (
		refusedX  = "sql insert: UNIQUE constraint failed: t2.x"
		dlqGroup  = "route_a/dlq"
		tblGroup  = "out/route_a.db:t2"
		lineGroup = "out/route_a__w3.jsonl"
	)
	type dlqLine struct{ key, reason, payload string }
	// The records of seed-26067: k-312 (tag t3, taken by k-153) was
	// dead-lettered at position 10, and position 26, a later k-312 with
	// no tag, inserted its row.
	k312 := dlqLine{"position 10", refusedX, `{"id":"k-312","seq":10,"qty":4,"tag":"t3"}`}
	k457 := dlqLine{"position 22", refusedX, `{"id":"k-457","seq":22,"qty":6,"tag":"t2"}`}
	badJSON := dlqLine{"position 149", "invalid JSON at byte 6: unexpected '}'", ""}
	rows := []string{`id="k-153" qty=6 x="t3"`, `id="k-312" qty=4 x=NULL`, `id="k-457" qty=2 x=NULL`, `id="k-96" qty=2 x="t2"`}
	route := func(edit func(*Artifact)) RouteShape {
		tbl := Artifact{Kind: "table", Path: "out/route_a.db", Table: "t2", Group: tblGroup, Mutable: []string{"qty", "x"},
			AnyBranch: true, OtherUnique: &OtherUnique{Column: "x", Key: "id", KeyField: "id"}}
		if edit != nil {
			edit(&tbl)
		}
		return RouteShape{Name: "route_a", Artifacts: []Artifact{
			{Kind: "dlq", Path: "out/route_a.dlq.jsonl", Group: dlqGroup}, tbl,
			{Kind: "lines", Path: "out/route_a__w3.jsonl", Group: lineGroup}}}
	}
	snap := func(rows []string, dlq ...dlqLine) Snapshot {
		s := newSnapshot()
		for _, g := range []string{dlqGroup, tblGroup, lineGroup} {
			s.Full[g], s.Kept[g] = Multiset{}, Multiset{}
		}
		for _, r := range rows {
			s.add(tblGroup, r, r)
		}
		s.add(lineGroup, `{"id":"k-1"}`, `{"id":"k-1"}`)
		for _, d := range dlq {
			s.add(dlqGroup, d.key, d.key)
			if d.payload != "" {
				s.addDLQ(dlqGroup, d.key, DLQEntry{Error: d.reason, Payload: []byte(d.payload)})
			}
		}
		return s
	}
	with := func(s Snapshot, edit func(Snapshot)) Snapshot { edit(s); return s }
	refused := func(reason string) Snapshot {
		return snap(rows, dlqLine{k312.key, reason, k312.payload}, badJSON)
	}

	for _, tc := range []struct {
		name     string
		route    RouteShape
		ref, got Snapshot
		ok       bool
		want     []string
	}{
		{
			name:  "seed-26067: a record refused for x applied as an update on a replay",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(rows, badJSON), ok: true,
			want: []string{"route_a/dlq: 1 record(s)", `position 10 (id "k-312")`,
				"dead-lettered in the clean run for a unique x taken by another id (UNIQUE constraint failed: t2.x)",
				"the killed run applied it as an update", "t2 equals the clean run's"},
		},
		{
			name:  "two such records, one dead-lettered twice by the clean run",
			route: route(nil), ref: snap(rows, k312, k457, k312, badJSON), got: snap(rows, badJSON), ok: true,
			want: []string{"2 record(s)", `position 10 (id "k-312")`, `position 22 (id "k-457")`},
		},
		{
			name:  "compared by content (a follow-mode or NATS dead-letter file)",
			route: route(nil),
			ref:   snap(rows, dlqLine{`record {"id":"k-312","qty":4,"seq":10,"tag":"t3"}`, refusedX, k312.payload}),
			got:   snap(rows), ok: true,
			want: []string{`(id "k-312")`},
		},

		// Still false: the sinks differ.
		{
			name:  "false: the table lacks a row the clean run has",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(rows[1:], badJSON),
		},
		{
			name:  "false: the table holds an extra row",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(append([]string{`id="k-9" qty=1 x=NULL`}, rows...), badJSON),
		},
		{
			name:  "false: the row of the record's key differs (its update was the last write)",
			route: route(nil), ref: snap(rows, k312, badJSON),
			got: snap([]string{rows[0], `id="k-312" qty=9 x=NULL`, rows[2], rows[3]}, badJSON),
		},
		{
			name:  "false: a row duplicated",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(append(rows, rows[1]), badJSON),
		},
		{
			name:  "false: another sink of the route differs",
			route: route(nil), ref: snap(rows, k312, badJSON),
			got: with(snap(rows, badJSON), func(s Snapshot) { s.add(lineGroup, `{"id":"k-1"}`, `{"id":"k-1"}`) }),
		},
		{
			name:  "false: the table differs and the dead-letter files are equal",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(rows[1:], k312, badJSON),
		},
		{
			name:  "false: nothing differs, so nothing is explained",
			route: route(nil), ref: snap(rows, k312), got: snap(rows, k312),
		},

		// Still false: the dead-letter file differs otherwise.
		{
			name:  "false: the killed run dead-lettered a record the clean run did not",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(rows, badJSON, k457),
		},
		{
			name:  "false: an unparsable line missing",
			route: route(nil), ref: snap(rows, k312, badJSON), got: snap(rows, k312),
		},
		{
			name:  "false: the clean run's line says nothing readable of the record",
			route: route(nil), ref: with(snap(rows, badJSON), func(s Snapshot) { s.add(dlqGroup, k312.key, k312.key) }),
			got: snap(rows, badJSON),
		},

		// Still false: the refusal did not depend on the table's rows.
		{name: "false: NOT NULL", route: route(nil), ref: refused("sql insert: NOT NULL constraint failed: t2.qty"), got: snap(rows, badJSON)},
		{name: "false: a key bound to NULL", route: route(nil),
			ref: refused("bind ${payload.id}: key column id would be NULL; NULLs never conflict, so a replay of this record would be inserted again"),
			got: snap(rows, badJSON)},
		{name: "false: a type failure", route: route(nil),
			ref: refused("bind ${payload.id}: evaluate payload.id: invalid operation: int(string) (1:9)"), got: snap(rows, badJSON)},
		{name: "false: a datatype mismatch", route: route(nil), ref: refused("sql insert: datatype mismatch"), got: snap(rows, badJSON)},
		{name: "false: a filter's error", route: route(nil),
			ref: refused("filter: evaluate payload.qty > 3: invalid operation: > (mismatched types string and int)"), got: snap(rows, badJSON)},
		{name: "false: the conflict target's own column", route: route(nil),
			ref: refused("sql insert: UNIQUE constraint failed: t2.id"), got: snap(rows, badJSON)},
		{name: "false: a unique index over two columns", route: route(nil),
			ref: refused("sql insert: UNIQUE constraint failed: t2.x, t2.qty"), got: snap(rows, badJSON)},
		{name: "false: another table's x", route: route(nil),
			ref: refused("sql insert: UNIQUE constraint failed: t3.x"), got: snap(rows, badJSON)},
		{name: "false: a column named like x", route: route(nil),
			ref: refused("sql insert: UNIQUE constraint failed: t2.xy"), got: snap(rows, badJSON)},
		{name: "false: the refusal of a call, not the sink's insert", route: route(nil),
			ref: refused("request call: UNIQUE constraint failed: t2.x"), got: snap(rows, badJSON)},

		// Still false: what the generator knows does not allow it.
		{name: "false: the generator declared no second unique column",
			route: route(func(a *Artifact) { a.OtherUnique = nil }), ref: snap(rows, k312, badJSON), got: snap(rows, badJSON)},
		{name: "false: the table is compared by key only (first wins)",
			route: route(func(a *Artifact) { a.FirstWins = true }), ref: snap(rows, k312, badJSON), got: snap(rows, badJSON)},
		{name: "false: the key column is per-delivery",
			route: route(func(a *Artifact) { a.Volatile = []string{"id"} }), ref: snap(rows, k312, badJSON), got: snap(rows, badJSON)},
		{name: "false: the table is on a server",
			route: route(func(a *Artifact) { a.Path = pgPlaceholder }), ref: snap(rows, k312, badJSON), got: snap(rows, badJSON)},

		// Still false: no row of the record's key, so no later record
		// could have made the replay an update: the record is lost.
		{name: "false: no row of the record's key in the table", route: route(nil),
			ref: snap([]string{rows[0], rows[2], rows[3]}, k312, badJSON), got: snap([]string{rows[0], rows[2], rows[3]}, badJSON)},
		{name: "false: the key only inside another column's value", route: route(nil),
			ref: snap([]string{rows[0], `id="k-5" qty=1 x="id=\"k-312\" "`}, k312), got: snap([]string{rows[0], `id="k-5" qty=1 x="id=\"k-312\" "`})},
		{name: "false: the record's id is a number", route: route(nil),
			ref: snap([]string{`id="312" qty=4 x=NULL`}, dlqLine{"position 10", refusedX, `{"id":312,"tag":"t3"}`}),
			got: snap([]string{`id="312" qty=4 x=NULL`})},
		{name: "false: the record has no id", route: route(nil),
			ref: snap(rows, dlqLine{"position 10", refusedX, `{"seq":10,"tag":"t3"}`}), got: snap(rows)},
		{name: "false: one of two missing records unexplained", route: route(nil),
			ref: snap(rows, k312, dlqLine{"position 30", "sql insert: NOT NULL constraint failed: t2.qty", `{"id":"k-457"}`}),
			got: snap(rows)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why, ok := explainDLQ(tc.route, tc.ref, tc.got)
			if ok != tc.ok {
				t.Fatalf("explained %v, want %v:\n%s", ok, tc.ok, why)
			}
			if !ok && why != "" {
				t.Errorf("an explanation for what is not explained:\n%s", why)
			}
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("the explanation lacks %q:\n%s", w, why)
				}
			}
		})
	}
}

// An explained difference is shown in the summary, the report and the
// tally, and is never counted as a false verdict.
func TestExplainedIsShownNotFalse(t *testing.T) {
	res := &Result{
		Case:      &Case{Name: "seed-26067", Seed: 26067, Kills: 5, Source: "route route_a { … }\n"},
		Verdicts:  []Verdict{{Name: "route_a", Guarantee: effectivelyOnce}, {Name: "route_b", Guarantee: effectivelyOnce}},
		Explained: []Explained{{Route: "route_a", Text: "route_a/dlq: 1 record(s) the clean run dead-lettered and this run did not, explained:\n"}},
	}
	if line := summaryLine(res); !strings.Contains(line, "route_a effectively-once ok (explained)") || !strings.Contains(line, "route_b effectively-once ok;") {
		t.Errorf("summary line: %s", line)
	}
	rep := report(res)
	if !strings.Contains(rep, "EXPLAINED: route route_a") || !strings.Contains(rep, "route_a/dlq: 1 record(s)") || strings.Contains(rep, "FALSE") {
		t.Errorf("report:\n%s", rep)
	}
	var tally Tally
	tally.Add(res)
	if tally.False != 0 || tally.Explained != 1 || !strings.Contains(tally.Line(), "explained differences: 1 (seed-26067)") {
		t.Errorf("tally: false %d, explained %d: %s", tally.False, tally.Explained, tally.Line())
	}
}
