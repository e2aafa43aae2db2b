package lazyre

import "testing"

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		expr, in string
		match    bool
	}{
		{`^part-(\d+)$`, "part-12", true},
		{`^part-(\d+)$`, "part-x", false},
		{`(?i)returning`, "INSERT … RETURNING id", true},
	} {
		re := New(tc.expr)
		if got := re().MatchString(tc.in); got != tc.match {
			t.Errorf("%s on %q: %v, want %v", tc.expr, tc.in, got, tc.match)
		}
		if first, again := re(), re(); first != again {
			t.Errorf("%s: compiled twice", tc.expr)
		}
	}
}

// TestNewBadPattern: a pattern that does not compile panics on first use,
// not when New is called.
func TestNewBadPattern(t *testing.T) {
	re := New(`(unclosed`)
	defer func() {
		if recover() == nil {
			t.Error("no panic on first use of a bad pattern")
		}
	}()
	re()
}
