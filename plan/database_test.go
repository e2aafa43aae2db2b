package plan

import "testing"

func TestSameDatabase(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"postgres://u:p@db:5432/app", "postgresql://u:other@DB/app?sslmode=disable", true},
		{"postgres://u@db/app", "postgres://u@db/other", false},
		{"postgres://u@db/app", "postgres://v@db/app", false},
		{"postgres://u@db/app", "postgres://u@db:5433/app", false},
		{"postgres://u@db/app", "postgres://u@db2/app", false},
		{"postgres://u@/app?host=db", "postgres://u@db/app", true},
		{"mysql://u:p@db/app", "mariadb://u@db:3306/app", true},
		{"mysql://u@db/app", "postgres://u@db/app", false},
		{"mysql://u@db/", "mysql://u@db/", false},
		{"sqlite://a.db", "sqlite://a.db", false},
		{"not a url", "not a url", false},
	}
	for _, c := range cases {
		if got := SameDatabase(c.a, c.b); got != c.want {
			t.Errorf("SameDatabase(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
