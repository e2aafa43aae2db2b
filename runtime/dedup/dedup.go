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
// Pebble locks its directory, so a store is held by one process at a time.
// A reservation therefore only has to be visible inside this process, and
// it lives in memory, shared by every Store on the same directory; only
// promotions are written to Pebble. That halves the writes per record and
// gives the right answer after a crash at once: a reservation left by a dead
// process can no longer be in flight, and waiting 5 s for it to expire would
// drop the records the crash left unacknowledged if the restart is quick.
//
// Lookups of a batch go through one Pebble iterator over the sorted keys
// rather than a Get per key: almost every key of a stream is new, and
// forward seeks over sorted keys reuse the blocks the previous seek loaded.
package dedup

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
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
	stateProcessed byte = 2
	keyPrefix           = "dedup/"
	valueLen            = 1 + 8 // state, expiry (unix nanos)
)

// reservations are the in-flight keys of one Pebble directory, shared by
// every Store opened on it (two routes may share a dedup store).
type reservations struct {
	mu   sync.Mutex
	keys map[string]int64 // key → expiry, unix nanos

	// write serializes promotions on the database with the sweep's
	// deletes: a key the sweep read as expired cannot be promoted between
	// that read and its delete.
	write sync.Mutex
	// The running sweep: each Promote also examines the next sweepChunk
	// keys after cursor and deletes the expired ones. A pass starts every
	// SweepEvery (the first at Open) and ends at the last key.
	cursor    []byte // nil: no pass under way
	nextSweep int64  // unix ns when the next pass starts
}

// SweepEvery is how often a pass over the store deletes the keys whose ttl
// ran out, besides the full sweep when a process first opens it: a store
// that runs for weeks does not keep every key it ever saw.
const SweepEvery = 10 * time.Minute

// sweepChunk is how many keys one Promote examines while a pass runs.
const sweepChunk = 1024

var (
	sharedMu sync.Mutex
	shared   = map[*pebble.DB]*reservations{}
)

// Store is a dedup key store on one Pebble database.
type Store struct {
	h *pebbledb.Handle
	// Expiry is the in-flight reservation expiry (InFlightExpiry unless a
	// test shortens it).
	Expiry time.Duration
	res    *reservations

	mu      sync.Mutex // guards the scratch below
	sorted  []int
	found   []int64 // processed-until per key of the batch being reserved, 0 when absent
	keyBuf  []byte
	valBuf  [valueLen]byte
	lookBuf []byte
}

// Open opens (or shares) the dedup store in dir. The first opening in a
// process sweeps expired keys before anything can use the store.
func Open(dir string) (*Store, error) {
	h, err := pebbledb.Open(dir)
	if err != nil {
		return nil, err
	}
	if h.First {
		if _, err := (&Store{h: h}).Sweep(time.Now()); err != nil {
			h.Close()
			return nil, err
		}
	}
	sharedMu.Lock()
	res := shared[h.DB]
	if res == nil {
		res = &reservations{keys: make(map[string]int64), nextSweep: time.Now().Add(SweepEvery).UnixNano()}
		shared[h.DB] = res
	}
	sharedMu.Unlock()
	return &Store{h: h, Expiry: InFlightExpiry, res: res}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.h.Dir }

// Handle is the underlying shared database handle.
func (s *Store) Handle() *pebbledb.Handle { return s.h }

func (s *Store) dbKey(buf []byte, key string) []byte {
	return append(append(buf[:0], keyPrefix...), key...)
}

// Reserve decides every key in keys, in order, and reserves the new ones
// (a repeat later in keys sees the earlier reservation). verdicts must have
// len(keys).
func (s *Store) Reserve(keys []string, now time.Time, verdicts []Verdict) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowNs := now.UnixNano()
	if err := s.lookupProcessed(keys, nowNs); err != nil {
		return err
	}
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	for i, k := range keys {
		if exp, ok := s.res.keys[k]; ok {
			if exp > nowNs {
				verdicts[i] = InFlight
				continue
			}
			delete(s.res.keys, k)
		}
		if s.found[i] > nowNs {
			verdicts[i] = Processed
			continue
		}
		verdicts[i] = New
		s.res.keys[k] = nowNs + int64(s.Expiry)
	}
	return nil
}

// lookupProcessed fills s.found with each key's processed-until time,
// seeking one iterator through the keys in sorted order.
func (s *Store) lookupProcessed(keys []string, nowNs int64) error {
	s.found = slices.Grow(s.found[:0], len(keys))[:len(keys)]
	s.sorted = slices.Grow(s.sorted[:0], len(keys))[:len(keys)]
	for i := range keys {
		s.found[i] = 0
		s.sorted[i] = i
	}
	slices.SortFunc(s.sorted, func(a, b int) int {
		switch {
		case keys[a] < keys[b]:
			return -1
		case keys[a] > keys[b]:
			return 1
		}
		return 0
	})
	it, err := s.h.DB.NewIter(&pebble.IterOptions{
		LowerBound: []byte(keyPrefix),
		UpperBound: keyUpperBound(),
	})
	if err != nil {
		return fmt.Errorf("dedup store %s: lookup: %w", s.h.Dir, err)
	}
	for _, i := range s.sorted {
		s.lookBuf = s.dbKey(s.lookBuf, keys[i])
		if !it.SeekGE(s.lookBuf) || !bytes.Equal(it.Key(), s.lookBuf) {
			continue
		}
		val := it.Value()
		if len(val) == valueLen && val[0] == stateProcessed {
			s.found[i] = int64(binary.LittleEndian.Uint64(val[1:9]))
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("dedup store %s: lookup: %w", s.h.Dir, err)
	}
	return nil
}

// Promote marks keys (reserved through this store) as processed until
// now+ttl. The write is not synced; call Sync at commit.
func (s *Store) Promote(keys []string, now time.Time, ttl time.Duration) error {
	if len(keys) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.write.Lock()
	defer s.res.write.Unlock()
	b := s.h.DB.NewBatch()
	defer b.Close()
	// The sweep's deletes go first: a key promoted now that the sweep read
	// as expired is deleted and set again in the same batch, and the set
	// wins.
	if err := s.sweepStep(b, now.UnixNano()); err != nil {
		return err
	}
	s.valBuf[0] = stateProcessed
	binary.LittleEndian.PutUint64(s.valBuf[1:9], uint64(now.Add(ttl).UnixNano()))
	for _, k := range keys {
		s.keyBuf = s.dbKey(s.keyBuf, k)
		if err := b.Set(s.keyBuf, s.valBuf[:], nil); err != nil {
			return fmt.Errorf("dedup store %s: promote: %w", s.h.Dir, err)
		}
	}
	if err := s.h.Write("promote", func() error { return b.Commit(pebble.NoSync) }); err != nil {
		return fmt.Errorf("dedup store %s: promote: %w", s.h.Dir, err)
	}
	// Only now drop the reservations: a repeat arriving in between sees
	// either the reservation or the processed key, never neither.
	s.res.mu.Lock()
	for _, k := range keys {
		delete(s.res.keys, k)
	}
	s.res.mu.Unlock()
	return nil
}

// sweepStep adds to b the deletes of the expired keys among the next
// sweepChunk keys of a pass, starting one when it is due. Called with
// s.res.write held.
func (s *Store) sweepStep(b *pebble.Batch, nowNs int64) error {
	r := s.res
	if r.cursor == nil {
		if nowNs < r.nextSweep {
			return nil
		}
		r.cursor = []byte(keyPrefix)
		r.nextSweep = nowNs + int64(SweepEvery)
	}
	it, err := s.h.DB.NewIter(&pebble.IterOptions{LowerBound: r.cursor, UpperBound: keyUpperBound()})
	if err != nil {
		return fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
	}
	n := 0
	for it.First(); it.Valid() && n < sweepChunk; it.Next() {
		n++
		val := it.Value()
		if len(val) == valueLen && int64(binary.LittleEndian.Uint64(val[1:9])) <= nowNs {
			if err := b.Delete(it.Key(), nil); err != nil {
				it.Close()
				return fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
			}
		}
	}
	var next []byte // where the next step starts; nil: the pass is over
	if it.Valid() {
		next = slices.Clone(it.Key())
	}
	if err := it.Close(); err != nil { // the bounds are in use until here
		return fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
	}
	r.cursor = next
	return nil
}

// keyUpperBound is the first key after every dedup key.
func keyUpperBound() []byte {
	return []byte(keyPrefix[:len(keyPrefix)-1] + string(keyPrefix[len(keyPrefix)-1]+1))
}

// Release frees reservations whose records were not acked, so they can be
// delivered again at once.
func (s *Store) Release(keys []string) error {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	for _, k := range keys {
		delete(s.res.keys, k)
	}
	return nil
}

// Sweep deletes processed keys whose ttl ran out before now, so the store
// does not grow with every key ever seen. It scans the whole store (expired
// keys are not ordered by time), deleting in batches; run it at start-up
// or now and then, not per batch. It returns how many keys it deleted.
func (s *Store) Sweep(now time.Time) (int, error) {
	nowNs := now.UnixNano()
	it, err := s.h.DB.NewIter(&pebble.IterOptions{
		LowerBound: []byte(keyPrefix),
		UpperBound: keyUpperBound(),
	})
	if err != nil {
		return 0, fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
	}
	defer it.Close()
	b := s.h.DB.NewBatch()
	deleted := 0
	flush := func() error {
		if b.Empty() {
			return nil
		}
		err := s.h.Write("sweep", func() error { return b.Commit(pebble.NoSync) })
		b.Close()
		b = s.h.DB.NewBatch()
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		val := it.Value()
		if len(val) != valueLen || int64(binary.LittleEndian.Uint64(val[1:9])) > nowNs {
			continue
		}
		if err := b.Delete(it.Key(), nil); err != nil {
			b.Close()
			return deleted, fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
		}
		deleted++
		if deleted%4096 == 0 {
			if err := flush(); err != nil {
				b.Close()
				return deleted, fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
			}
		}
	}
	if err := flush(); err != nil {
		b.Close()
		return deleted, fmt.Errorf("dedup store %s: sweep: %w", s.h.Dir, err)
	}
	b.Close()
	return deleted, it.Error()
}

// InFlight is the number of live reservations (for tests and metrics).
func (s *Store) InFlight() int {
	s.res.mu.Lock()
	defer s.res.mu.Unlock()
	return len(s.res.keys)
}

// Sync makes every promotion so far durable.
func (s *Store) Sync() error { return s.h.Sync() }

// Close releases the store's database handle. Reservations of the
// directory are forgotten with its last handle, as a new process would.
func (s *Store) Close() error {
	db := s.h.DB
	err := s.h.Close()
	if !s.h.IsOpen() {
		sharedMu.Lock()
		delete(shared, db)
		sharedMu.Unlock()
	}
	return err
}
