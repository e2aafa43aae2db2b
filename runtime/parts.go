package runtime

import (
	"sort"
)

// Part naming (name_by = source_position) shared by the file sink and
// the object_store sink (connector/objectstore, through PositionRuns and
// PartitionRanges in connector.go): a batch is cut into runs of
// consecutive source positions, each run becomes one immutable part named
// for the range it covers, and the ranges already written are kept in a
// rangeSet so a replayed record is skipped record by record.

// positionRuns sorts recs by partition and source position and cuts them
// into runs of consecutive positions in one partition. The runs share recs'
// backing array.
func positionRuns(recs []*Record) [][]*Record {
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Seq < recs[j].Seq
	})
	var runs [][]*Record
	for i := 0; i < len(recs); {
		j := i + 1
		for j < len(recs) && recs[j].Partition == recs[j-1].Partition && recs[j].Seq == recs[j-1].Seq+1 {
			j++
		}
		runs = append(runs, recs[i:j])
		i = j
	}
	return runs
}

// rangeSet is a set of disjoint, sorted closed ranges of positions.
type rangeSet struct {
	r [][2]uint64
}

func (rs *rangeSet) contains(p uint64) bool {
	i := sort.Search(len(rs.r), func(i int) bool { return rs.r[i][1] >= p })
	return i < len(rs.r) && rs.r[i][0] <= p
}

func (rs *rangeSet) add(start, end uint64) {
	i := sort.Search(len(rs.r), func(i int) bool { return rs.r[i][1]+1 >= start })
	j := i
	for j < len(rs.r) && rs.r[j][0] <= end+1 {
		start = min(start, rs.r[j][0])
		end = max(end, rs.r[j][1])
		j++
	}
	rs.r = append(rs.r[:i], append([][2]uint64{{start, end}}, rs.r[j:]...)...)
}

// partitionRanges is a rangeSet per source partition.
type partitionRanges map[int32]*rangeSet

func (pr partitionRanges) contains(r *Record) bool {
	rs := pr[r.Partition]
	return rs != nil && rs.contains(r.Seq)
}

func (pr partitionRanges) add(part int32, start, end uint64) {
	rs := pr[part]
	if rs == nil {
		rs = &rangeSet{}
		pr[part] = rs
	}
	rs.add(start, end)
}
