package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/mqb-dev/mqb/internal/sqlkv"
)

// SQLStore is the dedup store on a postgres:// or mysql:// server, shared
// by every instance of a route (several `mqbc run` behind one Kafka
// consumer group). It keeps the Pebble store's semantics, with the
// reservation in the table rather than in memory, since the instance that
// would see it is another process:
//
//   - Reserve claims each key that is absent, or whose row has expired (a
//     reservation older than Expiry, a processed key past its ttl), with an
//     upsert that only one instance can win; the row then names this
//     Reserve call as its owner. A key held by a live reservation is
//     InFlight, a key processed within its ttl Processed.
//   - Promote marks the keys processed until now+ttl, on ack.
//   - Release deletes the reservations this store still owns, so a failed
//     batch's records are delivered again at once.
//
// A live store renews its reservations every Expiry/3 for as long as their
// batches are in flight, however long a sink takes; a process that dies
// stops renewing, and its reservations expire after Expiry (5 s): the
// other instances, and its own restart, then take the keys. The instances'
// clocks must agree to well within Expiry; a reservation that runs more
// than Expiry+MaxClockLead past this store's now is refused as another
// instance's clock being ahead. Keys longer than 200 bytes are stored as
// their SHA-256.
//
// Keys live in namespaces, as in the Pebble store: every instance of one
// route opens the same namespace and shares its keys; another route's
// namespace is another key space. The table is created when missing:
//
//	mqb_dedup_keys (ns, k, state 1 reserved | 2 processed, expires_at unix ns, owner)
//
// Stores written before namespaces kept their keys in mqb_dedup (k, …):
// LegacyKeys counts the ones still remembered, for the runtime to refuse
// to start until they are adopted (AdoptLegacy) or dropped (DropLegacy).
type SQLStore struct {
	db *sqlkv.DB
	ns string
	// Expiry is the in-flight reservation expiry (InFlightExpiry unless a
	// test shortens it).
	Expiry time.Duration
	id     string
	seq    atomic.Uint64

	mu        sync.Mutex
	inflight  map[string]string // key → owner token of this store's live reservations
	lastSweep time.Time

	// The renewal of in-flight reservations starts with the first Reserve
	// (after a test set Expiry) and stops in Close.
	renewOnce sync.Once
	stopOnce  sync.Once
	stopRenew chan struct{}
	renewDone chan struct{}
	renewErr  atomic.Pointer[error] // the last renewal's error, nil once one succeeds
}

// MaxClockLead is how far past its expiry another instance's reservation
// may run, as this store's clock sees it, before Reserve calls the other
// instance's clock ahead of this one's.
const MaxClockLead = 5 * time.Second

// renewChunk is the most keys one renewal statement names.
const renewChunk = 1000

// sweepEvery is how often Promote also deletes the rows whose time ran out
// (an expired row is taken over by the next Reserve of its key anyway;
// the sweep keeps the table from growing with keys that never come back).
const sweepEvery = time.Minute

const (
	stateReserved = 1
	sqlTimeout    = 30 * time.Second
	maxKeyLen     = 200
)

// OpenSQL connects to url and creates the table if needed; the store sees
// the namespace "".
func OpenSQL(ctx context.Context, url string) (*SQLStore, error) {
	return OpenSQLNamespace(ctx, url, "")
}

// OpenSQLNamespace connects to url and creates the table if needed; the
// store sees only the keys of namespace ns.
func OpenSQLNamespace(ctx context.Context, url, ns string) (*SQLStore, error) {
	if why := ValidNamespace(ns); why != "" {
		return nil, fmt.Errorf("dedup store: namespace %q: %s", ns, why)
	}
	if len(ns) > maxKeyLen {
		return nil, fmt.Errorf("dedup store: namespace %q: longer than %d bytes", ns, maxKeyLen)
	}
	db, err := sqlkv.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("dedup store: %w", err)
	}
	ddl := `CREATE TABLE IF NOT EXISTS mqb_dedup_keys (ns TEXT NOT NULL, k TEXT NOT NULL, state SMALLINT NOT NULL, expires_at BIGINT NOT NULL, owner TEXT NOT NULL, PRIMARY KEY (ns, k))`
	if db.Dialect == sqlkv.MySQL {
		ddl = `CREATE TABLE IF NOT EXISTS mqb_dedup_keys (ns VARBINARY(255) NOT NULL, k VARBINARY(255) NOT NULL, state SMALLINT NOT NULL, expires_at BIGINT NOT NULL, owner VARCHAR(80) NOT NULL, PRIMARY KEY (ns, k))`
	}
	s := &SQLStore{db: db, ns: ns, Expiry: InFlightExpiry, id: uuid.NewString(), inflight: map[string]string{}, lastSweep: time.Now()}
	cctx, cancel := context.WithTimeout(ctx, sqlTimeout)
	defer cancel()
	if err := db.CreateTable(cctx, ddl); err != nil {
		db.Close()
		return nil, fmt.Errorf("dedup store %s: create table: %s", db.URL, db.Redact(err))
	}
	err = db.Tx(cctx, func(q sqlkv.Querier) error {
		// Sweep what expired while no instance ran.
		_, err := q.Exec(cctx, s.ph(`DELETE FROM mqb_dedup_keys WHERE expires_at <= $1`), time.Now().UnixNano())
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("dedup store %s: open: %s", db.URL, db.Redact(err))
	}
	return s, nil
}

// Namespace is the namespace the store sees.
func (s *SQLStore) Namespace() string { return s.ns }

// Where names the store for people: its URL (password redacted) and table.
func (s *SQLStore) Where() string { return s.db.URL + " table mqb_dedup_keys" }

// nsArg is the namespace as the driver binds it.
func (s *SQLStore) nsArg() any {
	if s.db.Dialect == sqlkv.MySQL {
		return []byte(s.ns)
	}
	return s.ns
}

func (s *SQLStore) ph(q string) string {
	if s.db.Dialect != sqlkv.MySQL {
		return q
	}
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if q[i] == '$' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
			b.WriteByte('?')
			for i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
				i++
			}
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

func storedKey(k string) string {
	if len(k) <= maxKeyLen {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Reserve decides every key in keys, in order, and reserves the new ones
// (a repeat later in keys sees the earlier reservation). verdicts must
// have len(keys).
func (s *SQLStore) Reserve(keys []string, now time.Time, verdicts []Verdict) error {
	if len(keys) == 0 {
		return nil
	}
	s.renewOnce.Do(s.startRenewal)
	token := fmt.Sprintf("%s/%d", s.id, s.seq.Add(1))
	nowNs := now.UnixNano()
	exp := nowNs + int64(s.Expiry)
	// A key this store holds in flight is a duplicate however long its
	// batch has been on its way: its row may be past its expiry, which
	// is there for other instances to take over from a dead one, not
	// for this one to let a repeat through while the first is unacked.
	s.mu.Lock()
	held := map[string]bool{}
	for _, k := range keys {
		if _, ok := s.inflight[storedKey(k)]; ok {
			held[storedKey(k)] = true
		}
	}
	s.mu.Unlock()
	// One row per distinct key, in sorted order so that two instances
	// upserting overlapping batches lock rows in the same order.
	uniq := make([]string, 0, len(keys))
	for _, k := range keys {
		if sk := storedKey(k); !held[sk] {
			uniq = append(uniq, sk)
		}
	}
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)

	type row struct {
		state int
		exp   int64
		owner string
	}
	found := make(map[string]row, len(uniq))
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	err := s.db.Tx(ctx, func(q sqlkv.Querier) error {
		if len(uniq) == 0 {
			return nil
		}
		clear(found)
		var b strings.Builder
		args := make([]any, 0, 4*len(uniq)+1)
		if s.db.Dialect == sqlkv.Postgres {
			// A live row (reserved or processed, not expired) is left
			// alone; an expired one is taken over.
			args = append(args, uniq, exp, token, nowNs, s.ns)
			if _, err := q.Exec(ctx, `INSERT INTO mqb_dedup_keys (ns, k, state, expires_at, owner)
				SELECT $5, k, 1, $2, $3 FROM unnest($1::text[]) AS k
				ON CONFLICT (ns, k) DO UPDATE SET state = 1, expires_at = EXCLUDED.expires_at, owner = EXCLUDED.owner
				WHERE mqb_dedup_keys.expires_at <= $4`, args...); err != nil {
				return err
			}
			return q.Query(ctx, `SELECT k, state, expires_at, owner FROM mqb_dedup_keys WHERE ns = $2 AND k = ANY($1::text[])`,
				func(scan func(...any) error) error {
					var k string
					var r row
					if err := scan(&k, &r.state, &r.exp, &r.owner); err != nil {
						return err
					}
					found[k] = r
					return nil
				}, uniq, s.ns)
		}
		// MySQL evaluates the assignments left to right, each seeing the
		// ones before: expires_at, which the others test, goes last.
		b.WriteString(`INSERT INTO mqb_dedup_keys (ns, k, state, expires_at, owner) VALUES `)
		for i, k := range uniq {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, 1, ?, ?)")
			args = append(args, s.nsArg(), []byte(k), exp, token)
		}
		b.WriteString(` ON DUPLICATE KEY UPDATE
			owner = IF(expires_at <= ?, VALUES(owner), owner),
			state = IF(expires_at <= ?, 1, state),
			expires_at = IF(expires_at <= ?, VALUES(expires_at), expires_at)`)
		args = append(args, nowNs, nowNs, nowNs)
		if _, err := q.Exec(ctx, b.String(), args...); err != nil {
			return err
		}
		b.Reset()
		args = args[:0]
		b.WriteString(`SELECT k, state, expires_at, owner FROM mqb_dedup_keys WHERE ns = ? AND k IN (`)
		args = append(args, s.nsArg())
		for i, k := range uniq {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("?")
			args = append(args, []byte(k))
		}
		b.WriteString(")")
		return q.Query(ctx, b.String(), func(scan func(...any) error) error {
			var k []byte
			var r row
			if err := scan(&k, &r.state, &r.exp, &r.owner); err != nil {
				return err
			}
			found[string(k)] = r
			return nil
		}, args...)
	})
	if err != nil {
		return fmt.Errorf("dedup store %s: reserve: %s", s.db.URL, s.db.Redact(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(keys))
	var ahead error
	for i, k := range keys {
		sk := storedKey(k)
		r, ok := found[sk]
		switch {
		case seen[sk], held[sk]:
			verdicts[i] = InFlight // the earlier record of this batch, or an earlier batch, holds it
		case ok && r.owner == token:
			verdicts[i] = New
			s.inflight[sk] = token
		case ok && r.state == stateReserved && !strings.HasPrefix(r.owner, s.id+"/"):
			verdicts[i] = HeldElsewhere
			if lead := time.Duration(r.exp - nowNs); lead > s.Expiry+MaxClockLead && ahead == nil {
				ahead = fmt.Errorf("dedup store %s: key %q is reserved by another instance until %s past this instance's clock, more than the reservation expiry (%s) and %s: is that instance's clock ahead of this one's? Instances sharing a dedup store need clocks that agree",
					s.Where(), k, lead.Round(time.Millisecond), s.Expiry, MaxClockLead)
			}
		case ok && r.state == stateReserved:
			verdicts[i] = InFlight
		case ok && r.exp > nowNs:
			verdicts[i] = Processed
		default:
			verdicts[i] = InFlight // taken and released meanwhile: let it come again
		}
		seen[sk] = true
	}
	return ahead
}

// startRenewal starts the goroutine that renews this store's reservations
// every Expiry/3 while their batches are in flight.
func (s *SQLStore) startRenewal() {
	s.stopRenew, s.renewDone = make(chan struct{}), make(chan struct{})
	every := max(s.Expiry/3, time.Millisecond)
	go func() {
		defer close(s.renewDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stopRenew:
				return
			case <-t.C:
				// A failed renewal is tried again at the next tick, two
				// of which come before the reservations would expire.
				if err := s.renew(time.Now()); err != nil {
					s.renewErr.Store(&err)
				} else {
					s.renewErr.Store(nil)
				}
			}
		}
	}()
}

// RenewErr is the last renewal's error, nil when it succeeded.
func (s *SQLStore) RenewErr() error {
	if p := s.renewErr.Load(); p != nil {
		return *p
	}
	return nil
}

// renew moves the expiry of this store's live reservations to now+Expiry.
// Only rows still reserved under this store's id are touched (a key
// promoted, released or taken over meanwhile is left alone), locked in key
// order as Reserve and Promote lock them, so that two instances' statements
// cannot deadlock.
func (s *SQLStore) renew(now time.Time) error {
	s.mu.Lock()
	keys := make([]string, 0, len(s.inflight))
	for k := range s.inflight {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	exp := now.Add(s.Expiry).UnixNano()
	mine := s.id + "/%"
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), renewChunk)]
		keys = keys[len(chunk):]
		err := s.query(func(ctx context.Context, q sqlkv.Querier) error {
			if s.db.Dialect == sqlkv.Postgres {
				_, err := q.Exec(ctx, `UPDATE mqb_dedup_keys SET expires_at = $1
					WHERE ns = $2 AND state = 1 AND owner LIKE $4 AND k IN (
						SELECT k FROM mqb_dedup_keys WHERE ns = $2 AND k = ANY($3::text[]) AND state = 1 AND owner LIKE $4
						ORDER BY k COLLATE "C" FOR UPDATE)`, exp, s.ns, chunk, mine)
				return err
			}
			in := strings.TrimSuffix(strings.Repeat("?, ", len(chunk)), ", ")
			args := make([]any, 0, len(chunk)+3)
			args = append(args, s.nsArg())
			for _, k := range chunk {
				args = append(args, []byte(k))
			}
			args = append(args, mine)
			// VARBINARY keys sort by their bytes, as Go sorts them.
			if err := q.Query(ctx, `SELECT k FROM mqb_dedup_keys WHERE ns = ? AND k IN (`+in+`) AND state = 1 AND owner LIKE ? ORDER BY k FOR UPDATE`,
				func(scan func(...any) error) error { var k []byte; return scan(&k) }, args...); err != nil {
				return err
			}
			_, err := q.Exec(ctx, `UPDATE mqb_dedup_keys SET expires_at = ? WHERE ns = ? AND k IN (`+in+`) AND state = 1 AND owner LIKE ?`,
				append([]any{exp}, args...)...)
			return err
		})
		if err != nil {
			return fmt.Errorf("dedup store %s: renew reservations: %s", s.db.URL, s.db.Redact(err))
		}
	}
	return nil
}

// Promote marks keys (reserved through this store) as processed until
// now+ttl. The write is committed when Promote returns.
func (s *SQLStore) Promote(keys []string, now time.Time, ttl time.Duration) error {
	if len(keys) == 0 {
		return nil
	}
	exp := now.Add(ttl).UnixNano()
	sk := make([]string, len(keys))
	for i, k := range keys {
		sk[i] = storedKey(k)
	}
	slices.Sort(sk)
	sk = slices.Compact(sk) // one upsert may not touch a row twice
	s.mu.Lock()
	sweep := now.Sub(s.lastSweep) >= sweepEvery
	if sweep {
		s.lastSweep = now
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	err := s.db.Tx(ctx, func(q sqlkv.Querier) error {
		if sweep {
			if _, err := q.Exec(ctx, s.ph(`DELETE FROM mqb_dedup_keys WHERE expires_at <= $1`), now.UnixNano()); err != nil {
				return err
			}
		}
		// An upsert, not an update: a reservation that outlived its expiry
		// (a slow write, retries) may have been swept or taken over; the
		// key is processed all the same.
		if s.db.Dialect == sqlkv.Postgres {
			_, err := q.Exec(ctx, `INSERT INTO mqb_dedup_keys (ns, k, state, expires_at, owner)
				SELECT $4, k, 2, $1, $3 FROM unnest($2::text[]) AS k
				ON CONFLICT (ns, k) DO UPDATE SET state = 2, expires_at = EXCLUDED.expires_at`, exp, sk, s.id, s.ns)
			return err
		}
		var b strings.Builder
		args := make([]any, 0, 4*len(sk))
		b.WriteString(`INSERT INTO mqb_dedup_keys (ns, k, state, expires_at, owner) VALUES `)
		for i, k := range sk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, 2, ?, ?)")
			args = append(args, s.nsArg(), []byte(k), exp, s.id)
		}
		b.WriteString(` ON DUPLICATE KEY UPDATE state = 2, expires_at = VALUES(expires_at)`)
		_, err := q.Exec(ctx, b.String(), args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("dedup store %s: promote: %s", s.db.URL, s.db.Redact(err))
	}
	s.mu.Lock()
	for _, k := range sk {
		delete(s.inflight, k)
	}
	s.mu.Unlock()
	return nil
}

// Release deletes the reservations of keys this store still owns.
func (s *SQLStore) Release(keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	type held struct{ k, owner string }
	s.mu.Lock()
	var rel []held
	for _, k := range keys {
		sk := storedKey(k)
		if tok, ok := s.inflight[sk]; ok {
			rel = append(rel, held{sk, tok})
			delete(s.inflight, sk)
		}
	}
	s.mu.Unlock()
	if len(rel) == 0 {
		return nil
	}
	// In key order, as Reserve, Promote and the renewal lock rows: two
	// instances' transactions then cannot deadlock.
	slices.SortFunc(rel, func(a, b held) int { return strings.Compare(a.k, b.k) })
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	err := s.db.Tx(ctx, func(q sqlkv.Querier) error {
		for _, h := range rel {
			var key any = h.k
			if s.db.Dialect == sqlkv.MySQL {
				key = []byte(h.k)
			}
			if _, err := q.Exec(ctx, s.ph(`DELETE FROM mqb_dedup_keys WHERE ns = $1 AND k = $2 AND owner = $3 AND state = 1`), s.nsArg(), key, h.owner); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dedup store %s: release: %s", s.db.URL, s.db.Redact(err))
	}
	return nil
}

// InFlight is the number of live reservations this store made.
func (s *SQLStore) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.inflight)
}

// Sync is a no-op: every promotion is committed by the server already.
func (s *SQLStore) Sync() error { return nil }

// Close stops renewing reservations and closes the connection.
// Reservations left are not released: they expire, as a dead process's
// would.
func (s *SQLStore) Close() error {
	s.renewOnce.Do(func() {}) // no renewal starts after Close
	s.stopOnce.Do(func() {
		if s.stopRenew != nil {
			close(s.stopRenew)
			<-s.renewDone
		}
	})
	return s.db.Close()
}

// Count is the number of the namespace's processed keys still remembered
// at now (reservations in flight are not counted).
func (s *SQLStore) Count(now time.Time) (int, error) {
	var n int64
	err := s.query(func(ctx context.Context, q sqlkv.Querier) error {
		return q.Query(ctx, s.ph(`SELECT count(*) FROM mqb_dedup_keys WHERE ns = $1 AND state = 2 AND expires_at > $2`),
			func(scan func(...any) error) error { return scan(&n) }, s.nsArg(), now.UnixNano())
	})
	if err != nil {
		return 0, fmt.Errorf("dedup store %s: count: %s", s.db.URL, s.db.Redact(err))
	}
	return int(n), nil
}

// Reset forgets every key of the namespace and returns how many were
// remembered.
func (s *SQLStore) Reset(now time.Time) (int, error) {
	n, err := s.Count(now)
	if err != nil {
		return 0, err
	}
	err = s.query(func(ctx context.Context, q sqlkv.Querier) error {
		_, err := q.Exec(ctx, s.ph(`DELETE FROM mqb_dedup_keys WHERE ns = $1`), s.nsArg())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dedup store %s: reset namespace %q: %s", s.db.URL, s.ns, s.db.Redact(err))
	}
	return n, nil
}

// legacyTable reports whether the table of stores before namespaces exists.
func (s *SQLStore) legacyTable(ctx context.Context, q sqlkv.Querier) (bool, error) {
	schema := "current_schema()"
	if s.db.Dialect == sqlkv.MySQL {
		schema = "DATABASE()"
	}
	found := false
	err := q.Query(ctx, `SELECT 1 FROM information_schema.tables WHERE table_name = 'mqb_dedup' AND table_schema = `+schema,
		func(scan func(...any) error) error { found = true; var x int; return scan(&x) })
	return found, err
}

// LegacyKeys is the number of processed keys, still remembered at now, in
// the table an mqb before namespaces wrote (mqb_dedup): no namespace sees
// them.
func (s *SQLStore) LegacyKeys(now time.Time) (int, error) {
	var n int64
	err := s.query(func(ctx context.Context, q sqlkv.Querier) error {
		ok, err := s.legacyTable(ctx, q)
		if err != nil || !ok {
			return err
		}
		return q.Query(ctx, s.ph(`SELECT count(*) FROM mqb_dedup WHERE state = 2 AND expires_at > $1`),
			func(scan func(...any) error) error { return scan(&n) }, now.UnixNano())
	})
	if err != nil {
		return 0, fmt.Errorf("dedup store %s: legacy keys: %s", s.db.URL, s.db.Redact(err))
	}
	return int(n), nil
}

// AdoptLegacy copies the processed legacy keys still remembered at now into
// the store's namespace, keeping their expiry, then empties mqb_dedup; it
// returns how many it copied.
func (s *SQLStore) AdoptLegacy(now time.Time) (int, error) {
	var n int64
	err := s.query(func(ctx context.Context, q sqlkv.Querier) error {
		ok, err := s.legacyTable(ctx, q)
		if err != nil || !ok {
			return err
		}
		ins := `INSERT INTO mqb_dedup_keys (ns, k, state, expires_at, owner)
			SELECT $1, k, 2, expires_at, owner FROM mqb_dedup WHERE state = 2 AND expires_at > $2
			ON CONFLICT (ns, k) DO NOTHING`
		if s.db.Dialect == sqlkv.MySQL {
			ins = `INSERT IGNORE INTO mqb_dedup_keys (ns, k, state, expires_at, owner)
			SELECT ?, k, 2, expires_at, owner FROM mqb_dedup WHERE state = 2 AND expires_at > ?`
		}
		if n, err = q.Exec(ctx, ins, s.nsArg(), now.UnixNano()); err != nil {
			return err
		}
		_, err = q.Exec(ctx, `DELETE FROM mqb_dedup`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dedup store %s: adopt legacy keys: %s", s.db.URL, s.db.Redact(err))
	}
	return int(n), nil
}

// DropLegacy empties mqb_dedup and returns how many processed keys it held
// still remembered at now.
func (s *SQLStore) DropLegacy(now time.Time) (int, error) {
	n, err := s.LegacyKeys(now)
	if err != nil || n == 0 {
		return n, err
	}
	err = s.query(func(ctx context.Context, q sqlkv.Querier) error {
		_, err := q.Exec(ctx, `DELETE FROM mqb_dedup`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("dedup store %s: drop legacy keys: %s", s.db.URL, s.db.Redact(err))
	}
	return n, nil
}

func (s *SQLStore) query(fn func(ctx context.Context, q sqlkv.Querier) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	return s.db.Tx(ctx, func(q sqlkv.Querier) error { return fn(ctx, q) })
}
