package sql

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/plan"
)

// TestPremiseKeyColumnParams: which placeholders bind the key columns.
func TestPremiseKeyColumnParams(t *testing.T) {
	parts := func(q string) []plan.Part {
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
	tests := []struct {
		q    string
		keys []string
		want string // "0:id 2:id", or "error"
	}{
		{"INSERT INTO t (id, v) VALUES (${a}, ${b}) ON CONFLICT (id) DO NOTHING", []string{"id"}, "0:id"},
		{"INSERT INTO t (v, ID) VALUES (${a}, ${b})", []string{"id"}, "1:id"},
		{`INSERT INTO "my t" ("x,y", id) VALUES ('a,b', lower(${a}))`, []string{"id"}, "0:id"},
		{"INSERT INTO s.t (id, r, v) VALUES (${a}, ${b}, ${c}), (${d}, ${e}, ${f})", []string{"id", "r"}, "0:id 1:r 3:id 4:r"},
		{"INSERT INTO t (id, v) VALUES (COALESCE(${a}, ${b}), /* ) */ ${c})", []string{"id"}, "0:id 1:id"},
		{"INSERT INTO t (v) VALUES (${a})", []string{"id"}, "error"},
		{"INSERT INTO t SELECT ${a}", []string{"id"}, "error"},
		{"INSERT INTO t (id, v) VALUES (${a})", []string{"id"}, "error"},
	}
	for _, tc := range tests {
		got, err := keyColumnParams(parts(tc.q), tc.keys, foldCaseless)
		s := "error"
		if err == nil {
			var xs []string
			for i := 0; i < 10; i++ {
				if c, ok := got[i]; ok {
					xs = append(xs, fmt.Sprintf("%d:%s", i, c))
				}
			}
			s = strings.Join(xs, " ")
		}
		if s != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.q, s, err, tc.want)
		}
	}
}
