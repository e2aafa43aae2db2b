package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sink is the engine's name for Sink (connector.go). Write marks a record
// that fails on its own — a constraint violation, a value it cannot bind —
// by setting rec.sinkErr, and carries on with the others; it returns an
// error only when the whole batch failed (nothing of it may be acked).
// Such an error is retried by the route's retry step when it is retryable.
type sink = Sink

// retryableError marks an error worth retrying (busy database, I/O).
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

func retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

func isRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// retryPolicy is the route's `retry` step (one attempt without one).
type retryPolicy struct {
	attempts   int
	backoff    time.Duration
	maxBackoff time.Duration
}

// write runs s.Write under the policy. Every attempt starts from a clean
// slate: per-record failures of an attempt that failed as a whole are
// forgotten, since its transaction was rolled back.
func (p retryPolicy) write(ctx context.Context, s sink, recs []*Record, onRetry func(error)) error {
	return p.do(recs, func() error { return s.Write(ctx, recs) }, onRetry)
}

// do runs write, a write of recs, under the policy.
func (p retryPolicy) do(recs []*Record, write func() error, onRetry func(error)) error {
	wait := p.backoff
	for attempt := 1; ; attempt++ {
		for _, r := range recs {
			r.sinkErr = ""
		}
		err := write()
		if err == nil {
			return nil
		}
		if !isRetryable(err) || attempt >= p.attempts {
			if attempt > 1 {
				return fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return err
		}
		if onRetry != nil {
			onRetry(err)
		}
		// Sleep even when ctx is cancelled: a drain finishes in-flight
		// batches, and the wait is bounded by max_backoff.
		time.Sleep(wait)
		wait = min(wait*2, p.maxBackoff)
	}
}
