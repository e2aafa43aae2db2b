package brokersrc

import (
	"slices"
	"testing"

	"github.com/google/uuid"
)

func TestUnackedTake(t *testing.T) {
	var u Unacked[string]
	for _, m := range []string{"a", "b", "c", "d"} {
		u.Push(m)
	}
	for _, c := range []struct {
		next uint64
		want []string
	}{
		{0, nil}, // nothing committed yet
		{2, []string{"a", "b"}},
		{2, nil},                // the same position again
		{1, nil},                // behind what was taken
		{9, []string{"c", "d"}}, // past what was read: all there is
	} {
		if got := u.Take(c.next); !slices.Equal(got, c.want) {
			t.Errorf("Take(%d) = %q, want %q", c.next, got, c.want)
		}
	}
	u.Push("e")
	if got := u.Take(5); !slices.Equal(got, []string{"e"}) {
		t.Errorf("after a push: %q, want [e]", got)
	}
}

func TestMessageID(t *testing.T) {
	space := uuid.MustParse("3f0b6c52-8e1d-4a57-b0c4-5d2e9a71f6c8")
	id := uuid.MustParse("0190f3a4-5b6c-7d8e-9f00-112233445566")
	for _, c := range []struct {
		v    string
		want uuid.UUID
		ok   bool
	}{
		{"", uuid.UUID{}, false},
		{id.String(), id, true},
		{"order-17", uuid.NewSHA1(space, []byte("order-17")), true},
	} {
		got, ok := MessageID(space, c.v)
		if got != c.want || ok != c.ok {
			t.Errorf("MessageID(%q) = %s, %v; want %s, %v", c.v, got, ok, c.want, c.ok)
		}
	}
}
