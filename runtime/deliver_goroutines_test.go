package runtime_test

import (
	"fmt"
	"os"
	"path/filepath"
	rtm "runtime"
	"runtime/metrics"
	"strings"
	"testing"
)

// TestBlockGroupsStartNoGoroutine: delivering a group with no record
// already dead (every group of a route moving blocks of lines) starts no
// goroutine for the DLQ write; one a group, and the thread it could wake,
// was system CPU for nothing. A file → file route over 64 times the input
// starts about as many goroutines as over one block's worth, not one
// more for each of its dozens of groups.
func TestBlockGroupsStartNoGoroutine(t *testing.T) {
	created := func() uint64 {
		s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	run := func(lines int) (goroutines uint64, out int64) {
		e := newTestEnv(t)
		var in strings.Builder
		for i := range lines {
			fmt.Fprintf(&in, `{"line":%d,"body":"a line of about sixty bytes, moved as read"}`+"\n", i)
		}
		if err := os.WriteFile(e.input, []byte(in.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		p := linesPlan(e, filepath.Join(e.dir, "out.txt"), 1024)
		rtm.GC()
		before := created()
		rs := runRoute(t, p, "lines")
		return created() - before, rs.Out
	}
	small, smallOut := run(3000) // under one block
	big, bigOut := run(64 * 3000)
	if smallOut != 3000 || bigOut != 64*3000 {
		t.Fatalf("wrote %d and %d lines, want 3000 and %d", smallOut, bigOut, 64*3000)
	}
	// 64 × 3000 lines of ~75 bytes are ~14 MB: over 50 blocks of 256 KiB,
	// over 25 groups.
	if big > small+10 {
		t.Errorf("the big route started %d goroutines, the small one %d: more than a few a group", big, small)
	}
	t.Logf("goroutines started: %d for 3000 lines, %d for %d", small, big, 64*3000)
}
