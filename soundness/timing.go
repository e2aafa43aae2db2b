package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// When a killed run differs from the clean run and a second clean run
// differs as well, the difference alone proves nothing: the route's
// outcome moves from run to run. Some of what a route leaves cannot move
// with timing, though, whatever order its records were applied in and
// whichever branch a per-delivery switch sent them to. invariants checks
// those, on the Kept projection (the rows without the columns a DO UPDATE
// or a first-wins conflict decides by arrival order):
//
//   - the number of records of a group, when the group's shape fixes it
//     (see countFixed) and both clean runs hold the same number: an
//     effectively-once route must hold exactly that many (more is a
//     duplicate, fewer a loss), an at-least-once route no fewer;
//   - the keys of a keyed table (see keyProjected): every key both clean
//     runs hold must be there (under either rung), and, on an
//     effectively-once route whose two clean runs hold the same keys, no
//     other key;
//   - the lines a dead-letter sink got because they are not records at
//     all (unparsable): every one both clean runs dead-lettered.
//
// A route the generator marks Timed decides by the clock (a per-delivery
// filter, a short dedup ttl): which records pass at all is timing, so no
// count or key is fixed and none is checked.

// groupShape is what the artifacts of one comparison group say about it.
type groupShape struct {
	arts []Artifact
	// shared: an artifact of the group is written by another route of
	// the file too (a part directory two routes share), whose records
	// and timing then count here as well.
	shared bool
}

// shapesOf groups route r's artifacts by their comparison group; used
// counts the routes of the file that write each table or path.
func shapesOf(r RouteShape, used map[string]int) map[string]*groupShape {
	out := map[string]*groupShape{}
	for _, a := range r.Artifacts {
		s := out[a.Group]
		if s == nil {
			s = &groupShape{}
			out[a.Group] = s
		}
		s.arts = append(s.arts, a)
		if used[artifactID(a)] > 1 {
			s.shared = true
		}
	}
	return out
}

// artifactID names what an artifact reads: a path, and a table in it.
func artifactID(a Artifact) string { return a.Path + "\x00" + a.Table }

// usedBy counts, for each table or path the case's routes read back, how
// many routes write it.
func usedBy(routes []RouteShape) map[string]int {
	n := map[string]int{}
	for _, r := range routes {
		seen := map[string]bool{}
		for _, a := range r.Artifacts {
			if id := artifactID(a); !seen[id] {
				seen[id] = true
				n[id]++
			}
		}
	}
	return n
}

// isDLQGroup: the group is the route's dead-letter sink.
func isDLQGroup(g string) bool { return strings.HasSuffix(g, "/dlq") }

// countFixed reports whether the number of records a group holds is
// fixed by the input alone, so timing cannot change it in a correct run:
//
//   - not a dead-letter sink compared as a set (a dead-letter write is
//     at-least-once by design: a replay may write a line again, and a
//     record's outcome may change on one);
//   - not under a switch on a request's outcome (AnyBranch: a replayed
//     record may leave the group for another);
//   - one artifact, or files only: the branches of a switch on a
//     per-delivery value share a group, and tables among them each absorb
//     their own repeats, so how many rows the group holds depends on how
//     a key's records were split between them;
//   - no artifact another route writes too.
func (s *groupShape) countFixed(g string, dlqOnce bool) bool {
	if s.shared || isDLQGroup(g) && !dlqOnce {
		return false
	}
	files := true
	for _, a := range s.arts {
		if a.AnyBranch {
			return false
		}
		if a.Kind != "lines" && a.Kind != "parts" {
			files = false
		}
	}
	return len(s.arts) == 1 || files
}

// keyed reports whether the group's Kept rows are the keys of keyed
// tables (every artifact is keyProjected, and none is under a switch on
// a request's outcome or written by another route).
func (s *groupShape) keyed(g string) bool {
	if s.shared || isDLQGroup(g) {
		return false
	}
	for _, a := range s.arts {
		if a.AnyBranch || !keyProjected(a) {
			return false
		}
	}
	return true
}

// keyProjected: a table whose Kept row is its key. Read back by key only
// (KeyOnly); or a table with mutable columns (the generator lists every
// column but the key of a table keyed on a stable value as mutable, and
// every column but the sorting key of a ReplacingMergeTree) and no
// per-delivery column left in the Kept row (an unkeyed table's row id, a
// per-delivery key: then the row is a delivery, not a key).
func keyProjected(a Artifact) bool {
	if a.Kind == "mongo" {
		// Every field but a stable _id mutable (mongosink.go).
		return slices.Contains(a.Mutable, mongoAllFields) && !slices.Contains(a.Volatile, "_id")
	}
	if a.Kind != "table" || a.KeyedDLQ {
		return false
	}
	if a.KeyOnly != "" {
		return true
	}
	if len(a.Mutable) == 0 {
		return false
	}
	for _, v := range a.Volatile {
		if !slices.Contains(a.Mutable, v) {
			return false
		}
	}
	return true
}

// invariants checks what timing cannot change (see the top of the file)
// in route r's killed snapshot against its two clean ones; exact is
// true under effectively-once (or exactly-once), dlqOnce when the verdict
// calls the dead-letter write effectively-once too. It returns the broken
// invariants, one paragraph per group, or "".
func invariants(r RouteShape, used map[string]int, exact, dlqOnce bool, c1, c2, killed Snapshot) string {
	if r.Timed {
		return ""
	}
	shapes := shapesOf(r, used)
	var gs []string
	for g := range shapes {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	var b strings.Builder
	for _, g := range gs {
		s := shapes[g]
		a, z, k := c1.Kept[g], c2.Kept[g], killed.Kept[g]
		var lines []string
		if s.countFixed(g, dlqOnce) {
			na, nz, nk := size(a), size(z), size(k)
			switch {
			case na != nz:
				// The clean runs disagree: the count is not fixed after
				// all (the generator's model missed something), which the
				// unexplained report shows.
			case exact && nk > na:
				lines = append(lines, fmt.Sprintf("  %d records where both clean runs hold %d: %d too many (a duplicate)", nk, na, nk-na))
			case nk < na:
				lines = append(lines, fmt.Sprintf("  %d records where both clean runs hold %d: %d missing (a loss)", nk, na, na-nk))
			}
		}
		if s.keyed(g) {
			var missing, extra []string
			same := true
			for _, key := range keys(a, z) {
				if a[key] > 0 && z[key] > 0 {
					if k[key] == 0 {
						missing = append(missing, "  - "+key)
					}
				} else {
					same = false
				}
			}
			if exact && same {
				for key := range k {
					if a[key] == 0 {
						extra = append(extra, "  + "+key)
					}
				}
				slices.Sort(extra)
			}
			if len(missing) > 0 {
				lines = append(lines, fmt.Sprintf("  %d keys both clean runs hold are missing:", len(missing)))
				lines = append(lines, clip(missing, 8)...)
			}
			if len(extra) > 0 {
				lines = append(lines, fmt.Sprintf("  %d keys neither clean run holds (they hold the same keys):", len(extra)))
				lines = append(lines, clip(extra, 8)...)
			}
		}
		if isDLQGroup(g) && !s.shared {
			var missing []string
			for key := range a {
				if strings.HasSuffix(key, unparsable) && z[key] > 0 && k[key] == 0 {
					missing = append(missing, "  - "+key)
				}
			}
			slices.Sort(missing)
			if len(missing) > 0 {
				lines = append(lines, fmt.Sprintf("  %d unparsable lines both clean runs dead-lettered are missing:", len(missing)))
				lines = append(lines, clip(missing, 8)...)
			}
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "%s (clean runs %d and %d, killed run %d records):\n%s\n", g, size(a), size(z), size(k), strings.Join(lines, "\n"))
		}
	}
	return b.String()
}

// cleanHints says, for a person sorting unexplained routes, what kind of
// difference two clean runs of route r show, group by group: keys of a
// keyed table that differ (an identity per-delivery for some records, or
// a key the generator forgot to mark volatile), a count the input should
// fix that differs (something per-delivery decides which records land),
// or rows that differ only in columns a conflict rewrites (which record
// of a key won depends on order: a first-wins or last-wins table at
// concurrency > 1 the generator did not mark).
func cleanHints(r RouteShape, used map[string]int, c1, c2 Snapshot) string {
	shapes := shapesOf(r, used)
	var b strings.Builder
	for _, g := range groups(c1.Full, c2.Full) {
		s := shapes[g]
		if s == nil {
			continue
		}
		a, z := c1.Kept[g], c2.Kept[g]
		var only1, only2 int
		for _, k := range keys(a, z) {
			switch {
			case a[k] > 0 && z[k] == 0:
				only1++
			case z[k] > 0 && a[k] == 0:
				only2++
			}
		}
		switch {
		case s.keyed(g) && only1+only2 > 0:
			fmt.Fprintf(&b, "  %s: keys differ (%d only in the first clean run, %d only in the second): the identity is per-delivery for some records, or the generator did not mark a per-delivery key volatile\n", g, only1, only2)
		case s.countFixed(g, false) && size(a) != size(z):
			fmt.Fprintf(&b, "  %s: %d records against %d, where the input fixes the count: something per-delivery decides which records land\n", g, size(a), size(z))
		case only1+only2 > 0:
			fmt.Fprintf(&b, "  %s: %d records only in the first clean run, %d only in the second\n", g, only1, only2)
		case !maps.Equal(c1.Full[g], c2.Full[g]):
			fmt.Fprintf(&b, "  %s: the same rows but for columns a conflict rewrites: which record of a key won depends on order (a first-wins or last-wins table at concurrency > 1 the generator did not mark)\n", g)
		}
	}
	return b.String()
}
