package objectstore

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mqb-dev/mqb/plan"
)

// Objects behind the cursor. The source reads a prefix in key order and,
// on a resume or a new listing, reads on after the last key it knew: an
// object added later under a key that sorts before that one would never
// be read. That is the plan's increasing_id premise on the source. The
// source checks it rather than trusting it: each listing is counted up to
// the last key known, and more objects there than were listed before is
// an object added behind the cursor, which stops the route naming the
// key. The count travels in the checkpoint (the "#<n>" of its mode), so a
// resumed route finds objects added while it was down before it reads
// anything. Fewer is an object deleted; a delete and an add behind the
// cursor between two listings cancel out and escape the count.

// ArmPremise takes the increasing_id premise: the source checks it whether
// armed or not; arming gives its error the premise's reason.
func (s *objectSource) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseIncreasingID {
		return fmt.Errorf("the object_store source cannot check a per-record %s premise", p.Kind)
	}
	s.premise = p.Reason
	return nil
}

// countUpTo counts the keys (sorted) at or before key.
func countUpTo(keys []string, key string) int {
	return sort.Search(len(keys), func(i int) bool { return keys[i] > key })
}

// objectMode is a checkpoint's mode: the key, whether it was read to its
// end, how many objects were listed at or before it and the newest stamp
// among them (source_stamps.go; -1: the store gives none).
func objectMode(key string, done bool, upTo, stamp int64) string {
	prefix := objectCheckpointAt
	if done {
		prefix = objectCheckpointDone
	}
	n := strconv.FormatInt(upTo, 10)
	if stamp >= 0 {
		n += "@" + strconv.FormatInt(stamp, 10)
	}
	return prefix[:len(prefix)-1] + "#" + n + ":" + key
}

// parseObjectMode reads what objectMode wrote, or a mode written before
// the count (upTo 0) or the stamp (-1) was kept.
func parseObjectMode(mode string) (key string, done bool, upTo, stamp int64, ok bool) {
	for _, prefix := range []string{objectCheckpointDone, objectCheckpointAt} {
		done = prefix == objectCheckpointDone
		if key, ok = strings.CutPrefix(mode, prefix); ok {
			return key, done, 0, -1, true
		}
		if rest, ok := strings.CutPrefix(mode, prefix[:len(prefix)-1]+"#"); ok {
			n, key, found := strings.Cut(rest, ":")
			n, st, hasStamp := strings.Cut(n, "@")
			upTo, err := strconv.ParseInt(n, 10, 64)
			stamp := int64(-1)
			if hasStamp && err == nil {
				stamp, err = strconv.ParseInt(st, 10, 64)
			}
			if found && err == nil && upTo >= 0 {
				return key, done, upTo, stamp, true
			}
		}
	}
	return "", false, 0, -1, false
}

// checkResumeBehind compares the listing Open made with the count the
// checkpoint kept for its key (0: not kept).
func (s *objectSource) checkResumeBehind(key string, upTo int64) error {
	if n := int64(countUpTo(s.keys, key)); upTo > 0 && n > upTo {
		return s.behindError(n-upTo, key, "the route committed")
	}
	return nil
}

// checkBehind compares a new listing's count of objects at or before the
// last key known with how many were listed there before.
func (s *objectSource) checkBehind(upTo int64) error {
	if known := s.before + int64(len(s.keys)); upTo > known {
		return s.behindError(upTo-known, s.lastKey, "the source listed")
	}
	return nil
}

func (s *objectSource) behindError(n int64, key, what string) error {
	msg := fmt.Sprintf("%d object(s) were added under keys that sort at or before %q, the last one %s, after it had read past them, and would never be read: objects must be added under keys that sort after every key already there (as the object_store sink writes them). To read them, start the route from the beginning (mqbc state reset) and let the sink absorb the records already written",
		n, key, what)
	if s.premise != "" {
		msg += "; the plan's premise increasing_id is broken (" + s.premise + ")"
	}
	return fmt.Errorf("route %s: object_store source %s: %s", s.route, s.url, msg)
}
