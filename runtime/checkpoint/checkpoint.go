// Package checkpoint keeps each route's committed source position in a
// Pebble store (the source's checkpoint_store), keyed by route name and
// written synchronously at every commit.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/mqb-dev/mqb/runtime/internal/pebbledb"
)

// Position is a committed source position.
type Position struct {
	// Source identifies what the position is in (e.g. the file path), so a
	// route pointed at another input does not resume at a stale offset.
	Source string `json:"source"`
	Mode   string `json:"mode,omitempty"`
	// NextIndex is the index of the first record not yet committed.
	NextIndex uint64 `json:"next_index"`
	// Offset is the byte offset where the record NextIndex starts.
	Offset int64 `json:"offset"`
	// Partitions holds, for a partitioned source (Kafka without a
	// consumer group), each partition's next offset to read. A source with
	// one partition keeps NextIndex and Offset only, so positions saved
	// before partitions existed read the same.
	Partitions map[int32]int64 `json:"partitions,omitempty"`
	// Plan is the file of the plan whose route saved the position (its
	// base name); empty for a plan made without one, and in positions
	// saved before it was kept. A route of another plan with the same
	// name refuses to take the position over.
	Plan string `json:"plan,omitempty"`
}

// Store reads and writes positions.
type Store struct {
	h *pebbledb.Handle
}

// Open opens (or shares) the checkpoint store in dir.
func Open(dir string) (*Store, error) {
	h, err := pebbledb.Open(dir)
	if err != nil {
		return nil, err
	}
	return &Store{h: h}, nil
}

// Handle is the underlying shared database handle.
func (s *Store) Handle() *pebbledb.Handle { return s.h }

func key(route string) []byte { return []byte("checkpoint/route/" + route) }

// Load returns the committed position of route, if any.
func (s *Store) Load(route string) (Position, bool, error) {
	val, closer, err := s.h.DB.Get(key(route))
	if errors.Is(err, pebble.ErrNotFound) {
		return Position{}, false, nil
	}
	if err != nil {
		return Position{}, false, fmt.Errorf("checkpoint store %s: load route %s: %w", s.h.Dir, route, err)
	}
	defer closer.Close()
	var p Position
	if err := json.Unmarshal(val, &p); err != nil {
		return Position{}, false, fmt.Errorf("checkpoint store %s: route %s: corrupt position: %w", s.h.Dir, route, err)
	}
	return p, true, nil
}

// Save durably records route's position (fsync before returning).
func (s *Store) Save(route string, p Position) error {
	val, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("checkpoint route %s: %w", route, err)
	}
	if err := s.h.Write("save", func() error { return s.h.DB.Set(key(route), val, pebble.Sync) }); err != nil {
		return fmt.Errorf("checkpoint store %s: save route %s: %w", s.h.Dir, route, err)
	}
	return nil
}

// Close releases the store's database handle.
func (s *Store) Close() error { return s.h.Close() }

// Where names the store for people: its directory.
func (s *Store) Where() string { return s.h.Dir }

// Delete forgets route's position (durably): its next run starts over.
func (s *Store) Delete(route string) error {
	if err := s.h.Write("delete", func() error { return s.h.DB.Delete(key(route), pebble.Sync) }); err != nil {
		return fmt.Errorf("checkpoint store %s: delete route %s: %w", s.h.Dir, route, err)
	}
	return nil
}

// Peek returns route's committed position without taking the route over
// (Load of a fenced store takes it).
func (s *Store) Peek(route string) (Position, bool, error) { return s.Load(route) }
