package runtime

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
)

// Part naming (name_by = source_position) shared by the file sink and
// the object_store sink (connector/objectstore, through PositionRuns,
// SpanOf and PartitionRanges in connector.go): a batch is cut into runs of
// consecutive element positions, each run becomes one immutable part named
// for the span it covers, and the spans already written are kept in a
// rangeSet so a replayed element is skipped element by element.
//
// An element position is a record's source position and its index among
// the records an unnest made of it (Record.kid; 0 for a record no unnest
// split). The index is a function of the input, not of the batch: unnest
// numbers the elements of each record in array order, and every element
// of a record is in the batch that read it. So a part may end inside a
// record's elements, and a replay skips exactly the elements a part holds
// and writes the others.

// elemPos is an element's position.
type elemPos struct {
	seq uint64
	kid uint32
}

// endOfRecord as an element index stands for the last element of its
// record, whatever their number: a span ending at (seq, endOfRecord)
// holds the record's elements through its last.
const endOfRecord = math.MaxUint32

func (a elemPos) less(b elemPos) bool {
	return a.seq < b.seq || (a.seq == b.seq && a.kid < b.kid)
}

// reaches reports whether the span ending at end touches or overlaps the
// one starting at start: start is at most the position after end.
func reaches(end, start elemPos) bool {
	if end.kid != endOfRecord {
		return !(elemPos{end.seq, end.kid + 1}).less(start)
	}
	return end.seq == math.MaxUint64 || !(elemPos{end.seq + 1, 0}).less(start)
}

// startOf is r's position as the first of a span.
func startOf(r *Record) elemPos { return elemPos{r.Seq, r.kid} }

// endOf is r's position as the last of a span: its record's end when r
// is the record's last element (or the record itself).
func endOf(r *Record) elemPos {
	if r.kids == 0 || r.kid+1 >= r.kids {
		return elemPos{r.Seq, endOfRecord}
	}
	return elemPos{r.Seq, r.kid}
}

// follows reports whether r is the element right after prev in one
// partition: the next of prev's record, or the first of the next record.
func follows(prev, r *Record) bool {
	if r.Partition != prev.Partition {
		return false
	}
	end := endOf(prev)
	if end.kid != endOfRecord {
		return r.Seq == end.seq && r.kid == end.kid+1
	}
	return end.seq != math.MaxUint64 && r.Seq == end.seq+1 && r.kid == 0
}

// positionRuns sorts recs by partition and element position and cuts them
// into runs of consecutive elements in one partition. The runs share
// recs' backing array.
func positionRuns(recs []*Record) [][]*Record {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return startOf(recs[i]).less(startOf(recs[j]))
	})
	var runs [][]*Record
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && follows(recs[j-1], recs[j]) {
			j++
		}
		runs = append(runs, recs[i:j])
		i = j
	}
	return runs
}

// PartSpan is the elements one part holds: every element from the first
// to the last, in source position and element order. Its text, in part
// names, is <first>[.<index>]-<last>[.<index>], positions zero-padded to
// 20 digits and indexes to 10: a first without an index starts at its
// record's first element, a last without one ends at its record's last,
// so a part of whole records is named as before unnest existed.
type PartSpan struct {
	first, last elemPos
}

// SpanOf is the span of the run of consecutive elements from first to
// last (a run PositionRuns made, or a stretch of one).
func SpanOf(first, last *Record) PartSpan {
	return PartSpan{first: startOf(first), last: endOf(last)}
}

// RecordSpan is the span of the whole records at positions first through
// last.
func RecordSpan(first, last uint64) PartSpan {
	return PartSpan{first: elemPos{first, 0}, last: elemPos{last, endOfRecord}}
}

// PartSpanPattern matches a span's text (for a part name's pattern).
const PartSpanPattern = `\d{20}(?:\.\d{10})?-\d{20}(?:\.\d{10})?`

var partSpanRE = regexp.MustCompile(`^(\d{20})(?:\.(\d{10}))?-(\d{20})(?:\.(\d{10}))?$`)

// String is the span's text in part names.
func (s PartSpan) String() string {
	first := fmt.Sprintf("%020d", s.first.seq)
	if s.first.kid != 0 {
		first += fmt.Sprintf(".%010d", s.first.kid)
	}
	last := fmt.Sprintf("%020d", s.last.seq)
	if s.last.kid != endOfRecord {
		last += fmt.Sprintf(".%010d", s.last.kid)
	}
	return first + "-" + last
}

// ParsePartSpan reads a span's text back (PartSpan.String).
func ParsePartSpan(text string) (PartSpan, error) {
	m := partSpanRE.FindStringSubmatch(text)
	if m == nil {
		return PartSpan{}, fmt.Errorf("part span %q: want <first>[.<index>]-<last>[.<index>]", text)
	}
	s := PartSpan{last: elemPos{kid: endOfRecord}}
	var err error
	if s.first.seq, err = strconv.ParseUint(m[1], 10, 64); err != nil {
		return PartSpan{}, fmt.Errorf("part span %q: %w", text, err)
	}
	if s.last.seq, err = strconv.ParseUint(m[3], 10, 64); err != nil {
		return PartSpan{}, fmt.Errorf("part span %q: %w", text, err)
	}
	for _, k := range []struct {
		text string
		to   *uint32
	}{{m[2], &s.first.kid}, {m[4], &s.last.kid}} {
		if k.text == "" {
			continue
		}
		n, err := strconv.ParseUint(k.text, 10, 32)
		if err != nil || n == endOfRecord {
			return PartSpan{}, fmt.Errorf("part span %q: element index %s out of range", text, k.text)
		}
		*k.to = uint32(n)
	}
	if s.last.less(s.first) {
		return PartSpan{}, fmt.Errorf("part span %q ends before it starts", text)
	}
	return s, nil
}

// rangeSet is a set of disjoint, sorted closed ranges of element
// positions, ranges that touch merged.
type rangeSet struct {
	r [][2]elemPos
}

func (rs *rangeSet) contains(p elemPos) bool {
	i := sort.Search(len(rs.r), func(i int) bool { return !rs.r[i][1].less(p) })
	return i < len(rs.r) && !p.less(rs.r[i][0])
}

func (rs *rangeSet) add(start, end elemPos) {
	i := sort.Search(len(rs.r), func(i int) bool { return reaches(rs.r[i][1], start) })
	j := i
	for j < len(rs.r) && reaches(end, rs.r[j][0]) {
		if rs.r[j][0].less(start) {
			start = rs.r[j][0]
		}
		if end.less(rs.r[j][1]) {
			end = rs.r[j][1]
		}
		j++
	}
	rs.r = append(rs.r[:i], append([][2]elemPos{{start, end}}, rs.r[j:]...)...)
}

// partitionRanges is a rangeSet per source partition.
type partitionRanges map[int32]*rangeSet

func (pr partitionRanges) contains(r *Record) bool {
	rs := pr[r.Partition]
	return rs != nil && rs.contains(startOf(r))
}

func (pr partitionRanges) add(part int32, s PartSpan) {
	rs := pr[part]
	if rs == nil {
		rs = &rangeSet{}
		pr[part] = rs
	}
	rs.add(s.first, s.last)
}
