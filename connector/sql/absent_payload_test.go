package sql

import "testing"

func TestPayloadHas(t *testing.T) {
	v := map[string]any{"a": map[string]any{"b": nil}, "c": 1}
	for _, tc := range []struct {
		path []string
		want bool
	}{
		{[]string{"a"}, true},
		{[]string{"a", "b"}, true},
		{[]string{"a", "x"}, false},
		{[]string{"c", "d"}, false},
		{[]string{"z"}, false},
	} {
		if got := payloadHas(v, tc.path); got != tc.want {
			t.Errorf("payloadHas(%v) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
