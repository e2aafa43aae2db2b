package objectstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Objects written behind the cursor. The count of source_behind.go finds
// an object added at or before the last key read, but not one written
// again in place: a daily export written over under the same name, read
// to its end before, was never read again, and one written over while the
// route was stopped inside it was read from the committed line on, in the
// new content, passing over the lines before it. Both ended 0.
//
// A store whose listing says when each object was written (stampLister)
// gives each listed object a stamp; the checkpoint keeps the greatest
// stamp of the objects listed at or before its key when that object was
// opened (the "@<stamp>" of its mode). On a resume, and on each new
// listing of a follow, an object at or before the last key read with a
// later stamp was written after the route read past it, and stops the
// route naming it. The stamps are the store's own (S3's LastModified,
// GCS's generation, a file's change time), compared with each other only,
// so the clocks of the store and of mqb never meet; S3 gives seconds, so
// an object written again within the second of the newest one read there
// escapes the check.

// stampLister is a store whose listing says when each object was last
// written: a stamp that grows with every write, comparable between the
// store's objects.
type stampLister interface {
	ListStamped(ctx context.Context, prefix string) (names []string, stamps []int64, err error)
}

// listing lists the whole store, without probe objects, with the stamps
// when the store gives them (nil otherwise).
func (s *objectSource) listing(ctx context.Context) ([]string, []int64, error) {
	sl, ok := s.store.(stampLister)
	if !ok {
		keys, err := s.store.List(ctx, "")
		return withoutProbes(keys), nil, err
	}
	keys, stamps, err := sl.ListStamped(ctx, "")
	if err != nil || len(stamps) != len(keys) {
		return keys, nil, err
	}
	out, outStamps := keys[:0], stamps[:0]
	for i, k := range keys {
		if !strings.HasPrefix(k, probePrefix) {
			out, outStamps = append(out, k), append(outStamps, stamps[i])
		}
	}
	return out, outStamps, nil
}

// newestUpTo returns the greatest stamp of the listed keys at or before
// key, and the key holding it (-1, "" when none or without stamps).
func newestUpTo(keys []string, stamps []int64, key string) (int64, string) {
	best, at := int64(-1), ""
	if stamps == nil {
		return best, at
	}
	for i, k := range keys[:countUpTo(keys, key)] {
		if stamps[i] > best {
			best, at = stamps[i], k
		}
	}
	return best, at
}

// prefixMax is the running greatest stamp of a listing, from start.
func prefixMax(stamps []int64, start int64) []int64 {
	if stamps == nil {
		return nil
	}
	out := make([]int64, len(stamps))
	for i, st := range stamps {
		start = max(start, st)
		out[i] = start
	}
	return out
}

// checkWritten compares the newest stamp listed at or before key with the
// one known there (known < 0: not known, nothing to check).
func (s *objectSource) checkWritten(keys []string, stamps []int64, key string, known int64, what string) error {
	if known < 0 || stamps == nil {
		return nil
	}
	newest, at := newestUpTo(keys, stamps, key)
	if newest <= known {
		return nil
	}
	msg := fmt.Sprintf("object %q, at or before %q, the last one %s, was written after the route had read past it (written %s, after everything it had listed there, %s): "+
		"an object written again would never be read again (or, the one the route stopped in, would be read on from the committed line in other content), and one added would never be read. "+
		"Objects must not change once written, and new ones must sort after every key there (as the object_store sink writes them). "+
		"To read it, start the route from the beginning (mqbc state reset) and let the sink absorb the records already written",
		at, key, what, s.stampText(newest), s.stampText(known))
	if s.premise != "" {
		msg += "; the plan's premise increasing_id is broken (" + s.premise + ")"
	}
	return fmt.Errorf("route %s: object_store source %s: %s", s.route, s.url, msg)
}

// stampText says a stamp in words: a time, except for GCS generations.
func (s *objectSource) stampText(st int64) string {
	if _, gcs := s.store.(*gcsStore); gcs {
		return fmt.Sprintf("generation %d", st)
	}
	return time.Unix(0, st).UTC().Format(time.RFC3339Nano)
}

// withoutKnown is keys and stamps without the keys at or before last,
// and the greatest stamp among those.
func withoutKnown(keys []string, stamps []int64, last string) ([]string, []int64, int64) {
	n := countUpTo(keys, last)
	newest := int64(-1)
	if stamps != nil {
		newest = slices.Max(append([]int64{-1}, stamps[:n]...))
		stamps = stamps[n:]
	}
	return keys[n:], stamps, newest
}
