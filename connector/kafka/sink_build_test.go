package kafka

import (
	"testing"

	"github.com/google/uuid"
)

// appendUUIDText writes what uuid's String does, after what buf held.
func TestAppendUUIDText(t *testing.T) {
	ids := []uuid.UUID{uuid.Nil, uuid.Max, uuid.MustParse("0190a3c4-5e6f-7a8b-9cde-f0123456789a")}
	for i, u := range ids {
		got := appendUUIDText([]byte("before"), u)
		if string(got) != "before"+u.String() {
			t.Errorf("%d: %q, want %q", i, got, "before"+u.String())
		}
	}
}
