package runtime

import (
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/internal/jsonvalue"
)

// TestKeyStringOfNil: a template part that is missing fails the
// expression instead of rendering "<nil>" into a key.
func TestKeyStringOfNil(t *testing.T) {
	tests := []struct {
		src, payload string
		want         string // "" → error
	}{
		{`"ord-" + string(payload.order_id)`, `{"order_id": 7}`, "ord-7"},
		{`"ord-" + string(payload.order_id)`, `{"order_id": "a"}`, "ord-a"},
		{`"ord-" + string(payload.order_id)`, `{"id": 7}`, ""},
		{`"ord-" + string(payload.order_id)`, `{"order_id": null}`, ""},
		{`"ord-" + string(payload.a.b)`, `{"a": {}}`, ""},
		{`"ord-" + string(payload.order_id ?? "none")`, `{}`, "ord-none"},
		{`"ord-" + string(payload.order_id)`, `{"order_id": 12345678901234567891}`, "ord-12345678901234567891"},
		{`"ord-" + string(payload.order_id)`, `{"order_id": 123456789012345678901234567891}`, "ord-123456789012345678901234567891"},
	}
	for _, tc := range tests {
		p, err := compileProgram(tc.src, nil)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonvalue.NewDecoder().Decode([]byte(tc.payload))
		if err != nil {
			t.Fatal(err)
		}
		var ev evaluator
		got, _, err := ev.run(p, &Record{value: v})
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "missing or null") {
				t.Errorf("%s on %s = %v, %v; want a missing-or-null error", tc.src, tc.payload, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s on %s = %v, %v; want %s", tc.src, tc.payload, got, err, tc.want)
		}
	}
}
