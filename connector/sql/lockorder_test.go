package sql

import (
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// templateParts splits q at its ${…} placeholders as the compiler does.
func templateParts(q string) []plan.Part {
	var ps []plan.Part
	for {
		i := strings.Index(q, "${")
		if i < 0 {
			return append(ps, plan.Part{Lit: q})
		}
		j := strings.Index(q[i:], "}")
		ps = append(ps, plan.Part{Lit: q[:i]}, plan.Part{Expr: q[i+2 : i+j]})
		q = q[i+j+1:]
	}
}

// The lock order of a PostgreSQL insert is its conflict target's
// parameters; a target the sink cannot read, or a key column no
// parameter fills, leaves the batch in read order.
func TestLockOrderOfConflictTarget(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want string // the parameters, or "nil"
	}{
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING", "[0]"},
		{"INSERT INTO t (v, k2, k1) VALUES (${a}, ${b}, ${c}) ON CONFLICT (k1, k2) DO UPDATE SET v = excluded.v", "[1 2]"},
		{`INSERT INTO t ("Id", v) VALUES (${a}, ${b}) ON CONFLICT ("Id") DO NOTHING`, "[0]"},
		{`INSERT INTO t ("Id", v) VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING`, "nil"}, // not the same column
		{"INSERT INTO t (id, v) VALUES (lower(${a}), ${b}) ON CONFLICT (id) DO NOTHING", "[0]"},
		{"INSERT INTO t (id, r, v) VALUES (${a}, 'x', ${b}) ON CONFLICT (id, r) DO NOTHING", "nil"}, // r takes no parameter
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT ON CONSTRAINT t_pkey DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT ((lower(id))) DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT DO NOTHING", "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}, ${b})", "nil"},
		{"INSERT INTO t (id, v) VALUES (${a}, 'on conflict (v)') ON CONFLICT (id) DO NOTHING", "[0]"},
	} {
		ps := templateParts(tc.q)
		got := fmt.Sprint(lockOrderOf(ps, pgConflictTarget(ps), foldPostgres))
		if got == "[]" {
			got = "nil"
		}
		if got != tc.want {
			t.Errorf("%s: lock order %s, want %s", tc.q, got, tc.want)
		}
	}
}

// Rows are sorted by their key values, stably: the repeats of a key keep
// their read order (the first of them is still the one a DO NOTHING
// keeps), NULL first; both ways of sorting agree.
func TestLockOrderSort(t *testing.T) {
	o := lockOrder{1}
	type row struct {
		tag string
		key any
	}
	in := []row{{"r0", "b"}, {"r1", "a"}, {"r2", "b"}, {"r3", nil}, {"r4", "ab"}, {"r5", "a"}}
	want := "r3 r1 r5 r4 r0 r2"
	text := make([][][]byte, len(in))
	var nv [][]driver.NamedValue
	live := []int{0, 1, 2, 3, 4, 5}
	for i, r := range in {
		text[i] = [][]byte{[]byte(r.tag), nil}
		if r.key != nil {
			text[i][1] = []byte(r.key.(string))
		}
		nv = append(nv, []driver.NamedValue{{Value: r.tag}, {Value: r.key}})
	}
	names := func(idx []int) string {
		var s []string
		for _, i := range idx {
			s = append(s, in[i].tag)
		}
		return strings.Join(s, " ")
	}
	if got := names(o.sortText(text, live)); got != want {
		t.Errorf("sortText: %s, want %s", got, want)
	}
	if got := names(live); got != "r0 r1 r2 r3 r4 r5" {
		t.Errorf("sortText changed live: %s", got)
	}
	byKey := slices.Clone(live)
	slices.SortStableFunc(byKey, func(a, b int) int {
		return strings.Compare(string(o.appendKey(nil, nv[a])), string(o.appendKey(nil, nv[b])))
	})
	if got := names(byKey); got != want {
		t.Errorf("appendKey: %s, want %s", got, want)
	}
	if got := names(lockOrder(nil).sortText(text, live)); got != "r0 r1 r2 r3 r4 r5" {
		t.Errorf("no lock order: %s, want read order", got)
	}
}
