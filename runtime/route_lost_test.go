package runtime

import (
	"errors"
	"strings"
	"testing"
)

// Two sink workers of a route each lose records, the later position
// first: the route's error must name the earliest lost record (where its
// position stopped and the rerun resumes) and count both. Before, the
// first worker's error was kept, naming record 577 while the checkpoint
// was at record 77.
func TestJoinLostNamesTheEarliestRecord(t *testing.T) {
	late := &lostRecordsError{route: "r", count: 8, where: "record 577", reason: "CHECK", why: "the route declares no dlq", seq: 577}
	early := &lostRecordsError{route: "r", count: 2, where: "record 77", reason: "CHECK", why: "the route declares no dlq", seq: 77}
	other := errors.New("route r: sink: disk full")

	got := joinLost(late, early)
	if !strings.Contains(got.Error(), "10 record(s) failed") || !strings.Contains(got.Error(), "the first, record 77:") {
		t.Errorf("joined error: %v", got)
	}
	if got := joinLost(early, late); !strings.Contains(got.Error(), "the first, record 77:") {
		t.Errorf("joined the other way: %v", got)
	}
	if got := joinLost(other, early); got != other {
		t.Errorf("a route that failed otherwise first keeps that error, got %v", got)
	}
	if got := joinLost(late, other); got != late {
		t.Errorf("a later failure of another kind leaves the lost records' error, got %v", got)
	}
	p1 := &lostRecordsError{route: "r", count: 1, where: "partition 1 offset 3", partition: 1, seq: 3}
	p0 := &lostRecordsError{route: "r", count: 1, where: "partition 0 offset 9", partition: 0, seq: 9}
	if got := joinLost(p1, p0); !strings.Contains(got.Error(), "partition 0 offset 9") {
		t.Errorf("partitions: %v", got)
	}
}
