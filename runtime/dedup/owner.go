package dedup

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble"

	"github.com/mqb-dev/mqb/internal/sqlkv"
)

// A namespace's owner is the plan file whose route first used it. Two
// plans with a route of one name, run against one store, would otherwise
// share the namespace "route/NAME" and take each other's records for
// repeats; the engine records the owner at the route's start and refuses
// a route of another plan (runtime's owner.go).

// ownerKey is where a Pebble store keeps ns's owner: outside every dedup
// key's bounds, so sweeps, counts and resets of keys never see it.
func ownerKey(ns string) []byte { return []byte("dedupowner/" + ns) }

// Owner returns the plan file recorded as the namespace's owner.
func (s *Store) Owner() (string, bool, error) {
	val, closer, err := s.h.DB.Get(ownerKey(s.ns))
	if errors.Is(err, pebble.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("dedup store %s: read the owner of namespace %q: %w", s.h.Dir, s.ns, err)
	}
	defer closer.Close()
	return string(val), true, nil
}

// SetOwner records owner as the namespace's owner (durably); "" forgets it.
func (s *Store) SetOwner(owner string) error {
	err := s.h.Write("owner", func() error {
		if owner == "" {
			return s.h.DB.Delete(ownerKey(s.ns), pebble.Sync)
		}
		return s.h.DB.Set(ownerKey(s.ns), []byte(owner), pebble.Sync)
	})
	if err != nil {
		return fmt.Errorf("dedup store %s: record the owner of namespace %q: %w", s.h.Dir, s.ns, err)
	}
	return nil
}

// ownerNS is the namespace column of the rows that hold owners in a SQL
// store (k is the namespace owned): route and shared namespaces start
// with "route/" or "shared/", so no namespace of keys is this one.
const ownerNS = "owner"

func (s *SQLStore) ownerArgs() (any, any) {
	if s.db.Dialect == sqlkv.MySQL {
		return []byte(ownerNS), []byte(s.ns)
	}
	return ownerNS, s.ns
}

// Owner returns the plan file recorded as the namespace's owner.
func (s *SQLStore) Owner() (string, bool, error) {
	owner, found := "", false
	ns, k := s.ownerArgs()
	err := s.query(func(ctx context.Context, q sqlkv.Querier) error {
		return q.Query(ctx, s.ph(`SELECT owner FROM mqb_dedup_keys WHERE ns = $1 AND k = $2`),
			func(scan func(...any) error) error { found = true; return scan(&owner) }, ns, k)
	})
	if err != nil {
		return "", false, fmt.Errorf("dedup store %s: read the owner of namespace %q: %s", s.db.URL, s.ns, s.db.Redact(err))
	}
	return owner, found, nil
}

// SetOwner records owner as the namespace's owner; "" forgets it. The row
// never expires.
func (s *SQLStore) SetOwner(owner string) error {
	ns, k := s.ownerArgs()
	err := s.query(func(ctx context.Context, q sqlkv.Querier) error {
		if _, err := q.Exec(ctx, s.ph(`DELETE FROM mqb_dedup_keys WHERE ns = $1 AND k = $2`), ns, k); err != nil || owner == "" {
			return err
		}
		_, err := q.Exec(ctx, s.ph(`INSERT INTO mqb_dedup_keys (ns, k, state, expires_at, owner) VALUES ($1, $2, 2, $3, $4)`),
			ns, k, int64(math.MaxInt64), owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("dedup store %s: record the owner of namespace %q: %s", s.db.URL, s.ns, s.db.Redact(err))
	}
	return nil
}
