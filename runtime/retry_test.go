package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// scriptedSink fails its first writes with the errors it is given.
type scriptedSink struct {
	errs   []error
	writes int
}

func (s *scriptedSink) Write(_ context.Context, recs []*Record) error {
	s.writes++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		recs[0].sinkErr = "left over from a failed attempt"
		return err
	}
	return nil
}

func (s *scriptedSink) Close() error { return nil }

func TestRetryPolicy(t *testing.T) {
	busy := retryable(errors.New("database is locked"))
	fatal := errors.New("no such table")
	tests := []struct {
		name       string
		attempts   int
		errs       []error
		wantWrites int
		wantErr    bool
	}{
		{"success first time", 5, nil, 1, false},
		{"retryable then success", 5, []error{busy, busy}, 3, false},
		{"retryable exhausted", 3, []error{busy, busy, busy, busy}, 3, true},
		{"not retryable", 5, []error{fatal}, 1, true},
		{"no retry step", 1, []error{busy}, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &scriptedSink{errs: tc.errs}
			p := retryPolicy{attempts: tc.attempts, backoff: time.Millisecond, maxBackoff: 2 * time.Millisecond}
			recs := []*Record{{}}
			retries := 0
			err := p.write(context.Background(), s, recs, func(error) { retries++ })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if s.writes != tc.wantWrites || retries != tc.wantWrites-1 {
				t.Errorf("writes %d retries %d, want %d writes", s.writes, retries, tc.wantWrites)
			}
			if err == nil && recs[0].sinkErr != "" {
				t.Errorf("a failed attempt's per-record error survived the successful one")
			}
		})
	}
}
