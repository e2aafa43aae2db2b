package dedup

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/mqb-dev/mqb/internal/sqlkv"
	"github.com/mqb-dev/mqb/internal/testsrv"
)

// namespacedStore is what both stores offer the runtime beyond Reserve.
type namespacedStore interface {
	Reserve(keys []string, now time.Time, verdicts []Verdict) error
	Promote(keys []string, now time.Time, ttl time.Duration) error
	Count(now time.Time) (int, error)
	Reset(now time.Time) (int, error)
	LegacyKeys(now time.Time) (int, error)
	AdoptLegacy(now time.Time) (int, error)
	DropLegacy(now time.Time) (int, error)
	Owner() (string, bool, error)
	SetOwner(owner string) error
	Close() error
}

func verdictsOf(t *testing.T, s namespacedStore, now time.Time, keys ...string) []Verdict {
	t.Helper()
	v := make([]Verdict, len(keys))
	if err := s.Reserve(keys, now, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Two namespaces of one store keep their keys apart: a key one of them
// processed is new to the other, and resetting one leaves the other alone.
// A store opened twice in one namespace shares its keys.
func checkNamespaces(t *testing.T, open func(ns string) namespacedStore) {
	now := time.Now()
	a, b, a2 := open("route/orders"), open("route/lines"), open("route/orders")
	if v := verdictsOf(t, a, now, "o-1", "o-2"); v[0] != New || v[1] != New {
		t.Fatalf("a: %v", v)
	}
	if err := a.Promote([]string{"o-1", "o-2"}, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if v := verdictsOf(t, b, now, "o-1", "o-2"); v[0] != New || v[1] != New {
		t.Errorf("another namespace sees a's keys: %v", v)
	}
	if v := verdictsOf(t, a2, now, "o-1"); v[0] != Processed {
		t.Errorf("the same namespace opened again: %v, want processed", v)
	}
	if err := a.SetOwner("a.mqb"); err != nil {
		t.Fatal(err)
	}
	if owner, found, err := a2.Owner(); err != nil || !found || owner != "a.mqb" {
		t.Errorf("owner seen through the same namespace: %q %v %v, want a.mqb", owner, found, err)
	}
	if owner, found, err := b.Owner(); err != nil || found {
		t.Errorf("owner of another namespace: %q %v %v, want none", owner, found, err)
	}
	if n, err := a.Count(now); err != nil || n != 2 {
		t.Errorf("count a: %d %v, want 2 (the owner is not a key)", n, err)
	}
	if n, err := a.Reset(now); err != nil || n != 2 {
		t.Errorf("reset a: %d %v, want 2", n, err)
	}
	if owner, _, err := a.Owner(); err != nil || owner != "a.mqb" {
		t.Errorf("owner after resetting the keys: %q %v, want a.mqb (the runtime forgets it)", owner, err)
	}
	if err := a.SetOwner("b.mqb"); err != nil {
		t.Fatal(err)
	}
	if owner, _, err := a2.Owner(); err != nil || owner != "b.mqb" {
		t.Errorf("owner after handing over: %q %v, want b.mqb", owner, err)
	}
	if err := a.SetOwner(""); err != nil {
		t.Fatal(err)
	}
	if owner, found, err := a.Owner(); err != nil || found {
		t.Errorf("owner after forgetting it: %q %v %v, want none", owner, found, err)
	}
	if v := verdictsOf(t, a, now, "o-1"); v[0] != New {
		t.Errorf("after reset: %v, want new", v)
	}
	if err := b.Promote([]string{"o-1"}, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Count(now); err != nil || n != 1 {
		t.Errorf("count b after resetting a: %d %v, want 1", n, err)
	}
}

func TestPebbleNamespaces(t *testing.T) {
	dir := t.TempDir()
	checkNamespaces(t, func(ns string) namespacedStore {
		s, err := OpenNamespace(dir, ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestSQLNamespaces(t *testing.T) {
	for name, newURL := range map[string]func(t *testing.T) string{
		"postgres": func(t *testing.T) string { return testsrv.Postgres(t) },
		"mariadb":  func(t *testing.T) string { return testsrv.MariaDBDatabase(t).URL },
	} {
		t.Run(name, func(t *testing.T) {
			url := newURL(t)
			checkNamespaces(t, func(ns string) namespacedStore {
				s, err := OpenSQLNamespace(context.Background(), url, ns)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			})
		})
	}
}

// A Pebble store written before namespaces: its keys are legacy, seen by
// no namespace; adopting gives them to one, dropping deletes them.
func TestPebbleLegacyKeys(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	writeLegacy := func() {
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var val [valueLen]byte
		val[0] = stateProcessed
		binary.LittleEndian.PutUint64(val[1:], uint64(now.Add(time.Hour).UnixNano()))
		var old [valueLen]byte
		old[0] = stateProcessed
		binary.LittleEndian.PutUint64(old[1:], uint64(now.Add(-time.Hour).UnixNano()))
		for k, v := range map[string][]byte{"o-1": val[:], "o-2": val[:], "o-3": old[:]} {
			if err := s.h.DB.Set([]byte(legacyPrefix+k), v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
	}
	writeLegacy()
	s, err := OpenNamespace(dir, "route/orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.LegacyKeys(now); err != nil || n != 2 {
		t.Fatalf("legacy keys %d %v, want 2 (the expired one swept)", n, err)
	}
	if v := verdictsOf(t, s, now, "o-1"); v[0] != New {
		t.Errorf("a namespace sees a legacy key: %v", v)
	}
	if err := s.Release([]string{"o-1"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.AdoptLegacy(now); err != nil || n != 2 {
		t.Fatalf("adopted %d %v, want 2", n, err)
	}
	if v := verdictsOf(t, s, now, "o-1", "o-2", "o-3"); v[0] != Processed || v[1] != Processed || v[2] != New {
		t.Errorf("after adopting: %v, want processed processed new", v)
	}
	if n, _ := s.LegacyKeys(now); n != 0 {
		t.Errorf("%d legacy keys left after adopting", n)
	}
	s.Close()

	writeLegacy()
	s, err = OpenNamespace(dir, "route/lines")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.DropLegacy(now); err != nil || n != 2 {
		t.Fatalf("dropped %d %v, want 2", n, err)
	}
	if n, _ := s.LegacyKeys(now); n != 0 {
		t.Errorf("%d legacy keys left after dropping", n)
	}
	if v := verdictsOf(t, s, now, "o-1"); v[0] != New {
		t.Errorf("after dropping: %v, want new", v)
	}
}

// The SQL store before namespaces kept its keys in mqb_dedup.
func TestSQLLegacyKeys(t *testing.T) {
	url := testsrv.Postgres(t)
	ctx := context.Background()
	now := time.Now()
	db, err := sqlkv.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if err := db.Tx(ctx, func(tx sqlkv.Querier) error { _, err := tx.Exec(ctx, q, args...); return err }); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenSQLNamespace(ctx, url, "route/orders")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.LegacyKeys(now); err != nil || n != 0 {
		t.Fatalf("legacy keys without the old table: %d %v", n, err)
	}
	exec(`CREATE TABLE mqb_dedup (k TEXT PRIMARY KEY, state SMALLINT NOT NULL, expires_at BIGINT NOT NULL, owner TEXT NOT NULL)`)
	exec(`INSERT INTO mqb_dedup VALUES ('o-1', 2, $1, 'x'), ('o-2', 2, $1, 'x'), ('o-3', 2, $2, 'x'), ('o-4', 1, $1, 'x')`,
		now.Add(time.Hour).UnixNano(), now.Add(-time.Hour).UnixNano())
	if n, err := s.LegacyKeys(now); err != nil || n != 2 {
		t.Fatalf("legacy keys %d %v, want 2", n, err)
	}
	if n, err := s.AdoptLegacy(now); err != nil || n != 2 {
		t.Fatalf("adopted %d %v, want 2", n, err)
	}
	if v := verdictsOf(t, s, now, "o-1", "o-2", "o-3", "o-4"); v[0] != Processed || v[1] != Processed || v[2] != New || v[3] != New {
		t.Errorf("after adopting: %v", v)
	}
	if n, _ := s.LegacyKeys(now); n != 0 {
		t.Errorf("%d legacy keys left", n)
	}
}
