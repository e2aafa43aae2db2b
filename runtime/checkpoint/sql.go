package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/internal/sqlkv"
)

// SQLStore keeps positions in a table on a postgres:// or mysql:// server,
// so instances of a route on several machines share them, and fences them:
// each row carries an owner id and an epoch. Load takes ownership of the
// route by bumping the epoch; Save writes only while the store still holds
// that epoch, so an instance another one has since taken over from (a
// zombie after a network partition, a duplicate started by mistake) gets
// ErrFenced instead of moving the position back.
//
// The table is created when missing:
//
//	mqb_checkpoints (route, position JSON text, owner, epoch, updated_at)
type SQLStore struct {
	db     *sqlkv.DB
	owner  string
	epochs map[string]int64 // route → the epoch this store owns
}

// ErrFenced is returned (wrapped) by Save when another owner took the
// route over since this store's Load.
var ErrFenced = errors.New("fenced: another instance took the route over")

const sqlTimeout = 30 * time.Second

// OpenSQL connects to url and creates the table if needed. owner names
// this instance in the table (a fresh UUID when empty).
func OpenSQL(ctx context.Context, url, owner string) (*SQLStore, error) {
	db, err := sqlkv.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	if owner == "" {
		owner = uuid.NewString()
	}
	s := &SQLStore{db: db, owner: owner, epochs: map[string]int64{}}
	ddl := `CREATE TABLE IF NOT EXISTS mqb_checkpoints (
		route TEXT PRIMARY KEY, position TEXT, owner TEXT NOT NULL, epoch BIGINT NOT NULL, updated_at BIGINT NOT NULL)`
	if db.Dialect == sqlkv.MySQL {
		ddl = `CREATE TABLE IF NOT EXISTS mqb_checkpoints (
		route VARCHAR(255) PRIMARY KEY, position TEXT, owner VARCHAR(255) NOT NULL, epoch BIGINT NOT NULL, updated_at BIGINT NOT NULL)`
	}
	cctx, cancel := context.WithTimeout(ctx, sqlTimeout)
	defer cancel()
	if err := db.CreateTable(cctx, ddl); err != nil {
		db.Close()
		return nil, fmt.Errorf("checkpoint store %s: create table: %s", db.URL, db.Redact(err))
	}
	return s, nil
}

// Owner is this store's owner id.
func (s *SQLStore) Owner() string { return s.owner }

// Epoch is the epoch this store holds for route (0 before Load).
func (s *SQLStore) Epoch(route string) int64 { return s.epochs[route] }

// Load takes ownership of route (epoch + 1) and returns its committed
// position, if any.
func (s *SQLStore) Load(route string) (Position, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	var (
		pos   *string
		epoch int64
	)
	now := time.Now().UnixNano()
	err := s.db.Tx(ctx, func(q sqlkv.Querier) error {
		pos, epoch = nil, 0
		var err error
		if s.db.Dialect == sqlkv.Postgres {
			_, err = q.Exec(ctx, `INSERT INTO mqb_checkpoints (route, position, owner, epoch, updated_at) VALUES ($1, NULL, $2, 1, $3)
				ON CONFLICT (route) DO UPDATE SET owner = EXCLUDED.owner, epoch = mqb_checkpoints.epoch + 1, updated_at = EXCLUDED.updated_at`,
				route, s.owner, now)
		} else {
			_, err = q.Exec(ctx, `INSERT INTO mqb_checkpoints (route, position, owner, epoch, updated_at) VALUES (?, NULL, ?, 1, ?)
				ON DUPLICATE KEY UPDATE owner = VALUES(owner), epoch = epoch + 1, updated_at = VALUES(updated_at)`,
				route, s.owner, now)
		}
		if err != nil {
			return err
		}
		return q.Query(ctx, s.ph(`SELECT position, epoch FROM mqb_checkpoints WHERE route = $1`), func(scan func(...any) error) error {
			return scan(&pos, &epoch)
		}, route)
	})
	if err != nil {
		return Position{}, false, fmt.Errorf("checkpoint store %s: load route %s: %s", s.db.URL, route, s.db.Redact(err))
	}
	s.epochs[route] = epoch
	if pos == nil {
		return Position{}, false, nil
	}
	var p Position
	if err := json.Unmarshal([]byte(*pos), &p); err != nil {
		return Position{}, false, fmt.Errorf("checkpoint store %s: route %s: corrupt position: %w", s.db.URL, route, err)
	}
	return p, true, nil
}

// Save writes route's position if this store still owns the route; the
// write is durable when Save returns (the server committed it).
func (s *SQLStore) Save(route string, p Position) error {
	epoch, ok := s.epochs[route]
	if !ok {
		return fmt.Errorf("checkpoint store %s: save route %s: Load the route first (it takes ownership)", s.db.URL, route)
	}
	val, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("checkpoint route %s: %w", route, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	err = s.db.Tx(ctx, func(q sqlkv.Querier) error {
		n, err := q.Exec(ctx, s.ph(`UPDATE mqb_checkpoints SET position = $1, updated_at = $2 WHERE route = $3 AND epoch = $4 AND owner = $5`),
			string(val), time.Now().UnixNano(), route, epoch, s.owner)
		if err != nil {
			return err
		}
		if n == 1 {
			return nil
		}
		// MySQL reports 0 rows for an update that changes nothing; check
		// the owner rather than trusting the count.
		var curOwner string
		var curEpoch int64
		err = q.Query(ctx, s.ph(`SELECT owner, epoch FROM mqb_checkpoints WHERE route = $1`), func(scan func(...any) error) error {
			return scan(&curOwner, &curEpoch)
		}, route)
		if err != nil {
			return err
		}
		if curOwner == s.owner && curEpoch == epoch {
			return nil
		}
		return &sqlkv.FencedError{Msg: fmt.Sprintf("owner %s holds epoch %d, this instance (%s) epoch %d", curOwner, curEpoch, s.owner, epoch)}
	})
	var fe *sqlkv.FencedError
	if errors.As(err, &fe) {
		return fmt.Errorf("checkpoint store %s: save route %s: %w (%s); stop this instance", s.db.URL, route, ErrFenced, fe.Msg)
	}
	if err != nil {
		return fmt.Errorf("checkpoint store %s: save route %s: %s", s.db.URL, route, s.db.Redact(err))
	}
	return nil
}

// ph rewrites $n placeholders to ? for MySQL.
func (s *SQLStore) ph(q string) string { return placeholders(s.db.Dialect, q) }

func placeholders(d sqlkv.Dialect, q string) string {
	if d != sqlkv.MySQL {
		return q
	}
	out := make([]byte, 0, len(q))
	for i := 0; i < len(q); i++ {
		if q[i] == '$' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
			out = append(out, '?')
			for i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
				i++
			}
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}

// Close closes the connection.
func (s *SQLStore) Close() error { return s.db.Close() }

// Where names the store for people: its URL (password redacted) and table.
func (s *SQLStore) Where() string { return s.db.URL + " table mqb_checkpoints" }

// Peek returns route's committed position without taking the route over.
func (s *SQLStore) Peek(route string) (Position, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	var pos *string
	err := s.db.Tx(ctx, func(q sqlkv.Querier) error {
		pos = nil
		return q.Query(ctx, s.ph(`SELECT position FROM mqb_checkpoints WHERE route = $1`), func(scan func(...any) error) error {
			return scan(&pos)
		}, route)
	})
	if err != nil {
		return Position{}, false, fmt.Errorf("checkpoint store %s: read route %s: %s", s.db.URL, route, s.db.Redact(err))
	}
	if pos == nil {
		return Position{}, false, nil
	}
	var p Position
	if err := json.Unmarshal([]byte(*pos), &p); err != nil {
		return Position{}, false, fmt.Errorf("checkpoint store %s: route %s: corrupt position: %w", s.db.URL, route, err)
	}
	return p, true, nil
}

// Delete forgets route's position: its next run starts over. An instance
// running the route meanwhile is fenced (its next Save fails).
func (s *SQLStore) Delete(route string) error {
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	err := s.db.Tx(ctx, func(q sqlkv.Querier) error {
		_, err := q.Exec(ctx, s.ph(`DELETE FROM mqb_checkpoints WHERE route = $1`), route)
		return err
	})
	if err != nil {
		return fmt.Errorf("checkpoint store %s: delete route %s: %s", s.db.URL, route, s.db.Redact(err))
	}
	return nil
}
