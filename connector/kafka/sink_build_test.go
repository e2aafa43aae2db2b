package kafka

import (
	"testing"

	"github.com/google/uuid"
)

// appendUUIDText writes what uuid's String does, after what the arena
// held, and hands out a slice that a later append cannot write over.
func TestAppendUUIDText(t *testing.T) {
	arena := make([]byte, 0, 100)
	arena = append(arena, "before"...)
	var got [][]byte
	ids := []uuid.UUID{uuid.Nil, uuid.Max, uuid.MustParse("0190a3c4-5e6f-7a8b-9cde-f0123456789a")}
	for _, u := range ids {
		got = append(got, appendUUIDText(&arena, u))
	}
	if string(arena[:6]) != "before" {
		t.Errorf("arena starts %q, want what it held", arena[:6])
	}
	for i, u := range ids {
		if string(got[i]) != u.String() || cap(got[i]) != 36 {
			t.Errorf("%d: %q (cap %d), want %q (cap 36)", i, got[i], cap(got[i]), u.String())
		}
	}
}
