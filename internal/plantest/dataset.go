package plantest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// MaxRecordBytes is the max_record_bytes of the test plans that read a
// generated dataset: GenDataset's over-long lines are longer.
const MaxRecordBytes = 2048

// Dataset is a generated input with what a correct run must produce.
type Dataset struct {
	Lines   []string
	IDs     map[string]int  // unique valid id → amount of its first occurrence
	Bad     map[uint64]bool // positions (record indexes) that must reach the DLQ
	Dups    int             // valid lines whose id was seen before
	Valid   []uint64        // positions of JSON-valid, short lines (for part sinks)
	Records int
}

// GenDataset writes n lines to path: mostly orders, with repeated ids,
// malformed JSON, missing ids, null amounts (NOT NULL violation) and lines
// over MaxRecordBytes, drawn from seed.
func GenDataset(t testing.TB, path string, n int, seed uint64) Dataset {
	rng := rand.New(rand.NewPCG(seed, 99))
	ds := Dataset{IDs: map[string]int{}, Bad: map[uint64]bool{}}
	var b strings.Builder
	next := 0
	for i := 0; i < n; i++ {
		pos := uint64(i)
		var line string
		switch r := rng.IntN(100); {
		case r < 3:
			line = fmt.Sprintf(`{"order_id": "o-%d", "amount": 1, "body": broken`, i)
			ds.Bad[pos] = true
		case r < 5:
			line = fmt.Sprintf(`{"amount": %d, "body": "no id"}`, i)
			ds.Bad[pos] = true
			ds.Valid = append(ds.Valid, pos)
		case r < 7:
			line = fmt.Sprintf(`{"order_id": "n-%d", "amount": null, "body": "null amount"}`, i)
			ds.Bad[pos] = true
			ds.Valid = append(ds.Valid, pos)
		case r < 8:
			line = fmt.Sprintf(`{"order_id": "l-%d", "amount": 1, "body": "%s"}`, i, strings.Repeat("x", MaxRecordBytes))
			ds.Bad[pos] = true
		case r < 20 && next > 0:
			k := rng.IntN(next)
			line = fmt.Sprintf(`{"order_id": "o-%d", "amount": %d, "body": {"repeat": %d}}`, k, k, i)
			ds.Dups++
			ds.Valid = append(ds.Valid, pos)
		default:
			line = fmt.Sprintf(`{"order_id": "o-%d", "amount": %d, "body": "order number %d"}`, next, next, next)
			ds.IDs[fmt.Sprintf("o-%d", next)] = next
			next++
			ds.Valid = append(ds.Valid, pos)
		}
		ds.Lines = append(ds.Lines, line)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	ds.Records = n
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return ds
}

// partName is how the file sink names a part file with name_by =
// source_position: part-<source>[-<partition>]-<first>-<last>.jsonl.
var partName = regexp.MustCompile(`^part-(.+?)(?:-(\d{10}))?-(\d{20})-(\d{20})\.jsonl$`)

// ReadParts checks the part files a file sink with name_by =
// source_position wrote to dir, reading ds from a file named orders…:
// names parse, ranges do not overlap, and each part's lines are the input
// lines of its range (minus the positions that went to the DLQ). It
// returns how often each position was written.
func ReadParts(t testing.TB, dir string, ds Dataset) map[uint64]int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	var lastEnd int64 = -1
	for _, en := range entries {
		m := partName.FindStringSubmatch(en.Name())
		if m == nil {
			t.Errorf("unexpected file %s in the part directory", en.Name())
			continue
		}
		if !strings.HasPrefix(m[1], "orders.") {
			t.Errorf("part %s: source %q, want orders.<route>.<file key>", en.Name(), m[1])
		}
		if m[2] != "0000000000" {
			t.Errorf("part %s: partition %q, want 0000000000", en.Name(), m[2])
		}
		start, _ := strconv.ParseUint(m[3], 10, 64)
		end, _ := strconv.ParseUint(m[4], 10, 64)
		if int64(start) <= lastEnd {
			t.Errorf("part %s overlaps the previous part (ending %d)", en.Name(), lastEnd)
		}
		lastEnd = int64(end)
		data, err := os.ReadFile(filepath.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if uint64(len(lines)) != end-start+1 {
			t.Errorf("part %s holds %d lines for %d positions", en.Name(), len(lines), end-start+1)
			continue
		}
		for i, l := range lines {
			p := start + uint64(i)
			if l != ds.Lines[p] {
				t.Errorf("part %s line %d: %q, want input line %d %q", en.Name(), i, l, p, ds.Lines[p])
			}
			seen[p]++
		}
	}
	return seen
}

// PartsWant is the set of positions a part sink must hold: JSON-valid
// lines (a part sink has no id step, so only malformed and long lines
// fail); bad is the rest of ds's bad positions, which only the DLQ holds.
func PartsWant(ds Dataset) (want map[uint64]bool, bad map[uint64]bool) {
	want, bad = map[uint64]bool{}, map[uint64]bool{}
	for _, p := range ds.Valid {
		want[p] = true
	}
	for p := range ds.Bad {
		if !want[p] {
			bad[p] = true
		}
	}
	return want, bad
}

// CheckPartsExactlyOnce asserts the parts wrote each wanted position once
// (seen counts how often each position was written) and nothing else.
func CheckPartsExactlyOnce(t testing.TB, seen map[uint64]int, want map[uint64]bool) {
	t.Helper()
	checkOnce(t, "position", seen, want, "written but should have been dead-lettered")
}

// CheckElementsExactlyOnce asserts the parts wrote each wanted element
// once (seen counts how often each was written) and nothing else: the
// elements an unnest made, named as the test's input names them.
func CheckElementsExactlyOnce(t testing.TB, seen map[string]int, want map[string]bool) {
	t.Helper()
	checkOnce(t, "element", seen, want, "written, but not one a run writes")
}

// checkOnce asserts seen holds each key of want once and no other key
// (what names a key in the errors, unwanted says what an extra one is).
func checkOnce[K comparable](t testing.TB, what string, seen map[K]int, want map[K]bool, unwanted string) {
	t.Helper()
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("%s %v written %d times", what, k, seen[k])
		}
	}
	for k := range seen {
		if !want[k] {
			t.Errorf("%s %v %s", what, k, unwanted)
		}
	}
}

// ReadDLQ returns how many times each position appears in the DLQ file at
// path, checking every line carries a reason.
func ReadDLQ(t testing.TB, path string) map[uint64]int {
	t.Helper()
	out := map[uint64]int{}
	for _, l := range ReadDLQLines(t, path) {
		if l.Error == "" {
			t.Errorf("dlq line without a reason: %+v", l)
		}
		out[l.Position]++
	}
	return out
}

// CheckDLQ asserts every bad position is in the DLQ (exactly once when
// exact) and nothing else is.
func CheckDLQ(t testing.TB, got map[uint64]int, want map[uint64]bool, exact bool) {
	t.Helper()
	for p := range want {
		if got[p] == 0 {
			t.Errorf("bad record %d missing from the DLQ", p)
		} else if exact && got[p] != 1 {
			t.Errorf("bad record %d in the DLQ %d times", p, got[p])
		}
	}
	for p := range got {
		if !want[p] {
			t.Errorf("record %d in the DLQ but valid", p)
		}
	}
}

// CheckOrderRows asserts got, a table's (id, amount) rows, holds each of
// ds's unique valid ids once, with the amount of its first occurrence when
// exactAmounts.
func CheckOrderRows(t testing.TB, got map[string]int, ds Dataset, exactAmounts bool) {
	t.Helper()
	if len(got) != len(ds.IDs) {
		t.Errorf("table has %d rows, want %d", len(got), len(ds.IDs))
	}
	missing := 0
	for id, amount := range ds.IDs {
		if g, ok := got[id]; !ok {
			if missing++; missing < 10 {
				t.Errorf("id %s missing from the table", id)
			}
		} else if exactAmounts && g != amount {
			t.Errorf("id %s: amount %d, want %d", id, g, amount)
		}
	}
	if missing > 0 {
		t.Errorf("%d ids missing", missing)
	}
}
