package runtime

import (
	"context"
	"testing"
)

// sizedSink is a sink that wants n records a write.
type sizedSink struct{ n int }

func (sizedSink) Write(context.Context, []*Record) error { return nil }
func (sizedSink) Close() error                           { return nil }
func (s sizedSink) WriteSize() int                       { return s.n }

// A sink that says how many records it wants in a write gets groups of
// read batches of about that many, one batch at least and 16 at most;
// others keep the route's default.
func TestGroupSizeFollowsWriteSize(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sink      Sink
		batchSize int
		want      int
	}{
		{"one batch holds it", sizedSink{4096}, 4096, 1},
		{"a larger batch", sizedSink{4096}, 10000, 1},
		{"four batches", sizedSink{4096}, 1024, 4},
		{"rounded up", sizedSink{4096}, 1000, 5},
		{"at most 16", sizedSink{4096}, 10, 16},
		{"no size said", keepingSink{}, 1024, 16},
	} {
		rt := &route{sink: tc.sink, batchSize: tc.batchSize}
		if got := rt.groupSize(); got != tc.want {
			t.Errorf("%s: group of %d batches of %d, want %d", tc.name, got, tc.batchSize, tc.want)
		}
	}
}
