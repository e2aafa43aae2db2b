package dedup

import (
	"fmt"
	"testing"
	"time"
)

// TestKeyFilter: a key added is always reported (a miss would let a
// duplicate through); a key never added is reported rarely (each costs a
// seek) at the sized capacity.
func TestKeyFilter(t *testing.T) {
	const n = 200_000
	f := newKeyFilter(n)
	for i := range n {
		f.add(fmt.Appendf(nil, "dedup2/ns\x00order-%d", i))
	}
	for i := range n {
		if !f.mayContain(fmt.Appendf(nil, "dedup2/ns\x00order-%d", i)) {
			t.Fatalf("key %d added but not found", i)
		}
	}
	fp := 0
	for i := range n {
		if f.mayContain(fmt.Appendf(nil, "dedup2/ns\x00other-%d", i)) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.02 {
		t.Errorf("false positives %.2f%%, want under 2%%", 100*rate)
	}
}

// TestFilterSeesKeysOnDisk: keys promoted by an earlier process (or an
// earlier open) are in the filter a new open builds, so they stay
// duplicates; keys adopted from the legacy format too.
func TestFilterSeesKeysOnDisk(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	st, err := OpenNamespace(dir, "r")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b", "c"}
	v := make([]Verdict, len(keys))
	if err := st.Reserve(keys, now, v); err != nil {
		t.Fatal(err)
	}
	if err := st.Promote(keys, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = OpenNamespace(dir, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.res.filter == nil || !st.res.filter.mayContain(st.dbKey(nil, "a")) {
		t.Fatal("the filter built at open does not hold a key on disk")
	}
	all := append(keys, "d")
	v = make([]Verdict, len(all))
	if err := st.Reserve(all, now, v); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(v) != "[processed processed processed new]" {
		t.Errorf("after reopen: %v", v)
	}
}
