package runtime

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// elems makes the records of one partition from a spec like "5 6:0/3 6:1/3
// 7": a bare number is a whole record at that position, seq:kid/kids an
// element unnest made of the record at seq.
func elems(t *testing.T, spec string) []*Record {
	t.Helper()
	var recs []*Record
	for _, f := range strings.Fields(spec) {
		r := &Record{}
		if _, err := fmt.Sscanf(f, "%d:%d/%d", &r.Seq, &r.kid, &r.kids); err != nil {
			if _, err := fmt.Sscanf(f, "%d", &r.Seq); err != nil {
				t.Fatalf("spec %q: %v", f, err)
			}
		}
		recs = append(recs, r)
	}
	return recs
}

// spans names the runs PositionRuns cuts recs into, space separated.
func spans(runs [][]*Record) string {
	var out []string
	for _, run := range runs {
		out = append(out, SpanOf(run[0], run[len(run)-1]).String())
	}
	return strings.Join(out, " ")
}

// short drops the zero padding of a span's text, for readable cases.
func short(text string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(text, func(r rune) bool { return r == ' ' }) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		s, err := ParsePartSpan(part)
		if err != nil {
			return "bad " + part
		}
		b.WriteString(fmt.Sprint(s.first.seq))
		if s.first.kid != 0 {
			fmt.Fprintf(&b, ".%d", s.first.kid)
		}
		fmt.Fprintf(&b, "-%d", s.last.seq)
		if s.last.kid != endOfRecord {
			fmt.Fprintf(&b, ".%d", s.last.kid)
		}
	}
	return b.String()
}

// TestPositionRunsElements: runs are cut where the next element is not the
// one after the last, inside a record's elements as well as between
// records, and a run's span says where it starts and ends inside one.
func TestPositionRunsElements(t *testing.T) {
	tests := []struct {
		name, recs, want string
	}{
		{"whole records", "3 4 5 7 8", "3-5 7-8"},
		{"unsorted records", "8 3 5 4 7", "3-5 7-8"},
		{"all of a record's elements", "4 5:0/3 5:1/3 5:2/3 6", "4-6"},
		{"elements out of order", "5:2/3 6 5:0/3 4 5:1/3", "4-6"},
		{"a record's first elements", "4 5:0/3 5:1/3", "4-5.1"},
		{"a record's last elements", "5:1/3 5:2/3 6", "5.1-6"},
		{"a middle element", "5:1/3", "5.1-5.1"},
		{"an element missing in the middle", "5:0/3 5:2/3 6", "5-5.0 5.2-6"},
		{"a record missing its last element", "5:0/3 5:1/3 6", "5-5.1 6-6"},
		{"the next record's first element missing", "5:0/2 5:1/2 6:1/2", "5-5 6.1-6"},
		{"elements of consecutive records", "5:1/2 6:0/4 6:1/4", "5.1-6.1"},
		{"one element of one", "5:0/1 6", "5-6"},
		{"a gap of a record", "5:0/2 5:1/2 7:0/2", "5-5 7-7.0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := short(spans(positionRuns(elems(t, tc.recs)))); got != tc.want {
				t.Errorf("runs of %q = %q, want %q", tc.recs, got, tc.want)
			}
		})
	}
}

// TestPositionRunsPartitions: a run never crosses partitions.
func TestPositionRunsPartitions(t *testing.T) {
	recs := elems(t, "5 6 7 8")
	recs[2].Partition, recs[3].Partition = 1, 1
	recs[0], recs[3] = recs[3], recs[0]
	runs := positionRuns(recs)
	if len(runs) != 2 || runs[0][0].Partition != 0 || runs[1][0].Partition != 1 {
		t.Fatalf("runs %v", runs)
	}
	if got := short(spans(runs)); got != "5-6 7-8" {
		t.Errorf("runs %q, want 5-6 7-8", got)
	}
}

// TestPartSpanText pins the text parts are named by: whole records as
// before unnest existed, an element index only where a part starts or
// ends inside a record's elements, and nothing else read back.
func TestPartSpanText(t *testing.T) {
	tests := []struct {
		span PartSpan
		text string
	}{
		{RecordSpan(3, 17), "00000000000000000003-00000000000000000017"},
		{PartSpan{elemPos{5, 2}, elemPos{9, endOfRecord}}, "00000000000000000005.0000000002-00000000000000000009"},
		{PartSpan{elemPos{5, 0}, elemPos{5, 0}}, "00000000000000000005-00000000000000000005.0000000000"},
		{PartSpan{elemPos{5, 1}, elemPos{6, 4}}, "00000000000000000005.0000000001-00000000000000000006.0000000004"},
		{RecordSpan(math.MaxUint64, math.MaxUint64), "18446744073709551615-18446744073709551615"},
	}
	for _, tc := range tests {
		if got := tc.span.String(); got != tc.text {
			t.Errorf("%+v = %q, want %q", tc.span, got, tc.text)
		}
		back, err := ParsePartSpan(tc.text)
		if err != nil || back != tc.span {
			t.Errorf("ParsePartSpan(%q) = %+v, %v; want %+v", tc.text, back, err, tc.span)
		}
	}
	for _, bad := range []string{
		"00000000000000000009-00000000000000000003",                       // ends before it starts
		"00000000000000000005.0000000003-00000000000000000005.0000000002", // inside one record, backwards
		"00000000000000000005.4294967295-00000000000000000006",            // the end-of-record index, written
		"00000000000000000005.4294967296-00000000000000000006",            // past an index
		"5-6",
		"00000000000000000005-00000000000000000006.12",
		"00000000000000000005-00000000000000000006.jsonl",
	} {
		if s, err := ParsePartSpan(bad); err == nil {
			t.Errorf("ParsePartSpan(%q) = %+v, want an error", bad, s)
		}
	}
}

// TestPartitionRangesElements: a set of spans holds exactly the elements
// they name, whatever order they are added in and however they touch.
func TestPartitionRangesElements(t *testing.T) {
	// span reads a span's short text: 3-5, 5.2-7, 3-5.1.
	span := func(text string) PartSpan {
		t.Helper()
		first, last, _ := strings.Cut(text, "-")
		s := PartSpan{last: elemPos{kid: endOfRecord}}
		for _, side := range []struct {
			text string
			pos  *elemPos
		}{{first, &s.first}, {last, &s.last}} {
			seq, kid, hasKid := strings.Cut(side.text, ".")
			if _, err := fmt.Sscan(seq, &side.pos.seq); err != nil {
				t.Fatalf("span %q: %v", text, err)
			}
			if hasKid {
				if _, err := fmt.Sscan(kid, &side.pos.kid); err != nil {
					t.Fatalf("span %q: %v", text, err)
				}
			}
		}
		return s
	}
	tests := []struct {
		name  string
		spans []string
		in    string // elements covered
		out   string // elements not covered
		runs  int    // disjoint ranges kept
	}{
		{"whole records", []string{"3-5"}, "3 4 5 4:2/3", "2 6 6:0/2", 1},
		{"a record's first elements", []string{"3-5.1"}, "3 4 5:0/4 5:1/4", "5:2/4 5:3/4 6", 1},
		{"a record's last elements", []string{"5.2-6"}, "5:2/4 5:3/4 6", "5:0/4 5:1/4 4 7", 1},
		{"the rest of the record added", []string{"3-5.1", "5.2-7"}, "3 5:0/4 5:3/4 7", "2 8", 1},
		{"added in the other order", []string{"5.2-7", "3-5.1"}, "3 5:1/4 5:2/4 7", "2 8", 1},
		{"a hole inside a record", []string{"3-5.0", "5.2-7"}, "5:0/4 5:2/4", "5:1/4", 2},
		{"the hole filled", []string{"3-5.0", "5.2-7", "5.1-5.1"}, "5:0/4 5:1/4 5:2/4", "8", 1},
		{"whole records that touch", []string{"8-9", "3-5", "6-7"}, "3 6 9", "2 10", 1},
		{"overlapping", []string{"3-6.1", "5-8", "4.3-5.0"}, "3 5:9/10 8", "2 9", 1},
		{"records apart", []string{"3-4", "6-7"}, "3 4 6 7", "5 5:0/2 8", 2},
		{"the last position", []string{fmt.Sprintf("%d-%d", uint64(math.MaxUint64)-1, uint64(math.MaxUint64)), "3-4"}, "3 18446744073709551615", "5", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := partitionRanges{}
			for _, s := range tc.spans {
				pr.add(0, span(s))
			}
			for _, r := range elems(t, tc.in) {
				if !pr.contains(r) {
					t.Errorf("%d.%d not covered by %v", r.Seq, r.kid, tc.spans)
				}
			}
			for _, r := range elems(t, tc.out) {
				if pr.contains(r) {
					t.Errorf("%d.%d covered by %v", r.Seq, r.kid, tc.spans)
				}
			}
			if n := len(pr[0].r); n != tc.runs {
				t.Errorf("%d ranges kept (%v), want %d", n, pr[0].r, tc.runs)
			}
			if r := (&Record{Partition: 1, Seq: 4}); pr.contains(r) {
				t.Error("another partition's position covered")
			}
		})
	}
}
