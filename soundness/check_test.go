package main

import (
	"strings"
	"testing"
	"time"
)

// Seed 17286 (-server-sinks hunt): a clean run stopped on a PostgreSQL
// deadlock between two sink workers, the other clean run ended well, and
// the checker called the route unexplained. A clean run that failed is no
// reference for the killed run: the route is inconclusive, whatever the
// killed run broke, and the failed run is the one reported.
func TestJudgeCleanDiff(t *testing.T) {
	ok := runResult{exitCode: 0, dur: time.Second}
	deadlock := runResult{exitCode: 1, dur: time.Second,
		stderr: "route route_a: sql sink (postgres://…): insert: ERROR: deadlock detected (SQLSTATE 40P01)"}
	broken := func() string { return "  3 records where both clean runs hold 2: 1 too many (a duplicate)\n" }
	intact := func() string { return "" }
	for _, tc := range []struct {
		name          string
		first, second runResult
		broken        func() string
		want          cleanDiffOutcome
		failed        string // stderr of the run judgeCleanDiff names as failed
	}{
		{"both clean runs ended well, nothing broken", ok, ok, intact, diffUnexplained, ""},
		{"both clean runs ended well, an invariant broken", ok, ok, broken, diffFalse, ""},
		{"the first clean run failed", deadlock, ok, intact, diffCleanFailed, deadlock.stderr},
		{"the first clean run failed, an invariant broken", deadlock, ok, broken, diffCleanFailed, deadlock.stderr},
		{"the second clean run failed", ok, deadlock, broken, diffCleanFailed, deadlock.stderr},
		{"both clean runs failed", deadlock, runResult{exitCode: 1, stderr: "other"}, broken, diffCleanFailed, deadlock.stderr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, failed := judgeCleanDiff(tc.first, tc.second, tc.broken)
			if got != tc.want {
				t.Fatalf("outcome %d, want %d", got, tc.want)
			}
			switch {
			case tc.failed == "" && failed != nil:
				t.Errorf("a failed run named (%v) where none failed", *failed)
			case tc.failed != "" && (failed == nil || failed.stderr != tc.failed):
				t.Errorf("failed run %v, want the one whose stderr is %q", failed, tc.failed)
			}
		})
	}
}

// A route made inconclusive by a failed clean run is counted and shown
// with the run's error, and never as a false verdict or an unexplained
// difference.
func TestCleanFailureIsShownInconclusive(t *testing.T) {
	deadlock := runResult{exitCode: 1, dur: 2 * time.Second,
		stderr: "route route_a: sql sink: insert: ERROR: deadlock detected (SQLSTATE 40P01)"}
	res := &Result{
		Case:         &Case{Name: "seed-17286", Seed: 17286, Kills: 8, Source: "route route_a { … }\n"},
		Verdicts:     []Verdict{{Name: "route_a", Guarantee: effectivelyOnce}, {Name: "route_b", Guarantee: atLeastOnce}},
		Inconclusive: []string{"route_a"},
		CleanFailed:  []CleanFailure{{Route: "route_a", Which: "first clean run", Run: deadlock}},
		Clean:        deadlock,
	}
	line := summaryLine(res)
	if !strings.Contains(line, "route_a effectively-once INCONCLUSIVE (first clean run failed)") ||
		!strings.Contains(line, "route_b at-least-once ok") {
		t.Errorf("summary line: %s", line)
	}
	rep := report(res)
	for _, want := range []string{"INCONCLUSIVE: route route_a", "first clean run failed", "SQLSTATE 40P01"} {
		if !strings.Contains(rep, want) {
			t.Errorf("the report lacks %q:\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "FALSE VERDICT") || strings.Contains(rep, "UNEXPLAINED") {
		t.Errorf("the report calls an inconclusive route false or unexplained:\n%s", rep)
	}
	var tally Tally
	tally.Add(res)
	if tally.False != 0 || tally.Unexplained != 0 || tally.CleanFailed != 1 {
		t.Errorf("tally: false %d, unexplained %d, clean failed %d; want 0, 0, 1", tally.False, tally.Unexplained, tally.CleanFailed)
	}
	if l := tally.Line(); !strings.Contains(l, "false verdicts: 0") || !strings.Contains(l, "inconclusive (a clean run failed): 1 (seed-17286)") {
		t.Errorf("tally line: %s", l)
	}
	if m := tally.Mix(); !strings.Contains(m, "timing-dependent differences 0") {
		t.Errorf("a failed clean run counted as timing-dependent: %s", m)
	}
}
