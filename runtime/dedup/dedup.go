// Package dedup is the Pebble-backed store behind the `dedup` step.
//
// A key goes through two states. On receive it is *reserved* with a short
// in-flight expiry (InFlightExpiry, 5 s): a second record with the same key
// while the first is in flight is a duplicate. On ack the key is *promoted*
// to processed with the step's ttl; until that ttl runs out every record with
// the key is a duplicate. A reservation that is never promoted (the sink
// failed, the process died) expires, so the key is delivered again rather
// than lost.
//
// Pebble locks its directory, so a store is held by one process at a time: a
// reservation written under another epoch (an earlier run of this process
// that died) can no longer be in flight and is ignored at once instead of
// after 5 s — otherwise a restart within 5 s of a crash would drop the
// records the crash left unacknowledged.
package dedup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/mqb-dev/mqb/runtime/internal/pebbledb"
)

// InFlightExpiry is how long a reservation holds a key before the sink acks.
const InFlightExpiry = 5 * time.Second

// Verdict is what Reserve decided for one key.
type Verdict uint8

const (
	// New: the key was free and is now reserved by the caller.
	New Verdict = iota
	// InFlight: another record holds a live reservation on the key.
	InFlight
	// Processed: the key was acked within its ttl.
	Processed
)

func (v Verdict) String() string {
	switch v {
	case New:
		return "new"
	case InFlight:
		return "in-flight"
	case Processed:
		return "processed"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// Duplicate reports whether the record carrying the key must be dropped.
func (v Verdict) Duplicate() bool { return v != New }

const (
	stateReserved  byte = 1
	stateProcessed byte = 2
	keyPrefix           = "dedup/"
	valueLen            = 1 + 8 + 8 // state, expiry (unix nanos), epoch
)

// Store is a dedup key store on one Pebble database.
type Store struct {
	h *pebbledb.Handle
	// Expiry is the in-flight reservation expiry (InFlightExpiry unless a
	// test shortens it).
	Expiry time.Duration

	mu sync.Mutex
	// inflight mirrors this store's live reservations, so a repeat within
	// one batch (not yet applied to Pebble) is seen, and most lookups of a
	// repeated key skip Pebble.
	inflight map[string]int64 // key → expiry unix nanos
	keyBuf   []byte
	valBuf   [valueLen]byte
}

// Open opens (or shares) the dedup store in dir.
func Open(dir string) (*Store, error) {
	h, err := pebbledb.Open(dir)
	if err != nil {
		return nil, err
	}
	return &Store{h: h, Expiry: InFlightExpiry, inflight: make(map[string]int64)}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.h.Dir }

// Handle is the underlying shared database handle.
func (s *Store) Handle() *pebbledb.Handle { return s.h }

func (s *Store) dbKey(key string) []byte {
	s.keyBuf = append(append(s.keyBuf[:0], keyPrefix...), key...)
	return s.keyBuf
}

func (s *Store) encode(state byte, expiry int64) []byte {
	s.valBuf[0] = state
	binary.LittleEndian.PutUint64(s.valBuf[1:9], uint64(expiry))
	binary.LittleEndian.PutUint64(s.valBuf[9:17], s.h.Epoch)
	return s.valBuf[:]
}

// Reserve decides every key in keys, in order, and reserves the new ones
// (a repeat later in keys sees the earlier reservation). verdicts must have
// len(keys). The reservations are written in one Pebble batch, not synced.
func (s *Store) Reserve(keys []string, now time.Time, verdicts []Verdict) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowNs := now.UnixNano()
	b := s.h.DB.NewBatch()
	defer b.Close()
	for i, k := range keys {
		if exp, ok := s.inflight[k]; ok {
			if exp > nowNs {
				verdicts[i] = InFlight
				continue
			}
			delete(s.inflight, k)
		}
		v, err := s.lookup(k, nowNs)
		if err != nil {
			return err
		}
		verdicts[i] = v
		if v != New {
			continue
		}
		exp := nowNs + int64(s.Expiry)
		s.inflight[k] = exp
		if err := b.Set(s.dbKey(k), s.encode(stateReserved, exp), nil); err != nil {
			return fmt.Errorf("dedup store %s: reserve: %w", s.h.Dir, err)
		}
	}
	if b.Empty() {
		return nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("dedup store %s: reserve: %w", s.h.Dir, err)
	}
	return nil
}

func (s *Store) lookup(k string, nowNs int64) (Verdict, error) {
	val, closer, err := s.h.DB.Get(s.dbKey(k))
	if errors.Is(err, pebble.ErrNotFound) {
		return New, nil
	}
	if err != nil {
		return New, fmt.Errorf("dedup store %s: lookup: %w", s.h.Dir, err)
	}
	defer closer.Close()
	if len(val) != valueLen {
		return New, nil // unknown encoding: treat as free rather than drop data
	}
	exp := int64(binary.LittleEndian.Uint64(val[1:9]))
	if exp <= nowNs {
		return New, nil
	}
	switch val[0] {
	case stateProcessed:
		return Processed, nil
	case stateReserved:
		if binary.LittleEndian.Uint64(val[9:17]) == s.h.Epoch {
			return InFlight, nil
		}
	}
	return New, nil
}

// Promote marks keys (reserved by this store) as processed until now+ttl.
// The write is not synced; call Sync at commit.
func (s *Store) Promote(keys []string, now time.Time, ttl time.Duration) error {
	if len(keys) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp := now.Add(ttl).UnixNano()
	b := s.h.DB.NewBatch()
	defer b.Close()
	for _, k := range keys {
		delete(s.inflight, k)
		if err := b.Set(s.dbKey(k), s.encode(stateProcessed, exp), nil); err != nil {
			return fmt.Errorf("dedup store %s: promote: %w", s.h.Dir, err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("dedup store %s: promote: %w", s.h.Dir, err)
	}
	return nil
}

// Release frees reservations whose records were not acked, so they can be
// delivered again at once.
func (s *Store) Release(keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.h.DB.NewBatch()
	defer b.Close()
	for _, k := range keys {
		delete(s.inflight, k)
		if err := b.Delete(s.dbKey(k), nil); err != nil {
			return fmt.Errorf("dedup store %s: release: %w", s.h.Dir, err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("dedup store %s: release: %w", s.h.Dir, err)
	}
	return nil
}

// Sync makes every promotion so far durable.
func (s *Store) Sync() error { return s.h.Sync() }

// Close releases the store's database handle.
func (s *Store) Close() error { return s.h.Close() }
