package sql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/plan"
)

// The transactional outbox: a route that reads a sql cursor source and
// writes with a sql sink into the same database commits the cursor
// position in the sink's own transaction, in table mqb_outbox (route,
// next_value; route is the route's name and a hash of its source and
// target table, outboxKey). A batch's rows and the position past them then land
// together or not at all, and the source resumes from the later of
// mqb_outbox and its checkpoint store: a crash between the write and the
// checkpoint replays nothing, so even a plain INSERT into a table without
// a unique key writes each row once.
//
// It needs the batches written in read order, so it is on only at
// concurrency = 1, and not behind a handler (which writes elsewhere). The
// position covers the records the sink was given; a record dead-lettered
// before or by the sink goes to the DLQ outside that transaction, so a
// crash at that moment can leave it out of the DLQ (the DLQ is
// at-most-once under the outbox, the sink exactly-once). The compiler
// proves such a route exactly-once under the same conditions (prove.go,
// outboxProof); both call plan.SameDatabase, so they cannot disagree.
const (
	outboxTablePG    = `CREATE TABLE IF NOT EXISTS mqb_outbox (route TEXT PRIMARY KEY, next_value BIGINT NOT NULL)`
	outboxTableMySQL = `CREATE TABLE IF NOT EXISTS mqb_outbox (route VARCHAR(255) PRIMARY KEY, next_value BIGINT NOT NULL)`
	outboxUpsertPG   = `INSERT INTO mqb_outbox (route, next_value) VALUES ($1, $2)
		ON CONFLICT (route) DO UPDATE SET next_value = GREATEST(mqb_outbox.next_value, EXCLUDED.next_value)`
	outboxUpsertMySQL = `INSERT INTO mqb_outbox (route, next_value) VALUES (?, ?)
		ON DUPLICATE KEY UPDATE next_value = GREATEST(next_value, VALUES(next_value))`
)

// outboxNext is the cursor value after the last record of a write.
func outboxNext(recs []*runtime.Record) uint64 {
	var next uint64
	for _, r := range recs {
		next = max(next, r.Seq+1)
	}
	return next
}

func (s *sqlServerSink) queueOutbox(b *pgconn.Batch, recs []*runtime.Record) {
	if s.outboxRoute == "" {
		return
	}
	b.ExecParams(outboxUpsertPG, [][]byte{[]byte(s.outboxRoute), strconv.AppendUint(nil, outboxNext(recs), 10)}, nil, nil, nil)
}

// WireOutbox turns the outbox on when the route's source and sink allow
// it (runtime.OutboxSink).
func (sk *sqlSink) WireOutbox(ctx context.Context, s runtime.Source, rt runtime.OutboxRoute) error {
	src, ok := s.(*sqlCursorSource)
	if !ok {
		return nil
	}
	if sk.server == nil || sk.server.dialect != src.dialect || !plan.SameDatabase(src.rawURL, sk.server.rawURL) {
		return nil
	}
	if !rt.InOrder {
		rt.Log.Info("sql source and sink share a database, but the transactional outbox needs concurrency = 1: positions are checkpointed as usual")
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	if src.dialect == dialectPostgres {
		var c *pgconn.PgConn
		if c, err = pgconn.ConnectConfig(cctx, sk.server.pg.cfg); err == nil {
			_, err = c.Exec(cctx, outboxTablePG).ReadAll()
			c.Close(cctx)
		}
	} else {
		_, err = sk.server.my.ExecContext(cctx, outboxTableMySQL)
	}
	if err != nil {
		return fmt.Errorf("route %s: transactional outbox: create mqb_outbox on %s: %s", rt.Name, sk.server.url, plan.RedactURLs(err.Error()))
	}
	key := outboxKey(rt.Name, src, sk)
	sk.server.outboxRoute = key
	src.outboxRoute = key
	rt.Log.Info("transactional outbox: the cursor position commits in the sink's transaction", "table", "mqb_outbox")
	return nil
}

// outboxKey is the mqb_outbox row of a route: its name and a hash of
// what it reads (table or query, cursor column) and where it writes (the
// table insert_query names, or the whole statement when it names none
// this reads). Another pipeline's route of the same name on the same
// database, or this route after its source or target table changed, has
// a row of its own: keyed by the name alone, it resumed from a position
// of other rows and never read the ones below it. A statement edited
// without changing its table keeps the row.
func outboxKey(route string, src *sqlCursorSource, sink *sqlSink) string {
	target, _, ok := insertNames(sink.insertParts)
	if !ok {
		target = sink.server.query
	}
	h := sha256.Sum256([]byte(src.name + "\x00" + src.col + "\x00" + target))
	return route + " " + hex.EncodeToString(h[:8])
}

// outboxResume moves the source past what the sink's transactions
// committed.
func (s *sqlCursorSource) outboxResume(ctx context.Context) error {
	var next uint64
	var found bool
	if s.dialect == dialectPostgres {
		err := s.pg.QueryRow(ctx, `SELECT next_value FROM mqb_outbox WHERE route = $1`, s.outboxRoute).Scan(&next)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		found = err == nil
	} else {
		rows, err := s.my.QueryContext(ctx, `SELECT next_value FROM mqb_outbox WHERE route = ?`, s.outboxRoute)
		if err != nil {
			return err
		}
		for rows.Next() {
			if err := rows.Scan(&next); err != nil {
				rows.Close()
				return err
			}
			found = true
		}
		rows.Close()
	}
	if found && next > s.nextVal {
		s.log.Info("resuming from the transactional outbox", "next_value", next, "checkpoint_next_value", s.nextVal)
		s.nextVal, s.resumed = next, true
		s.behindKnown = false // the checkpoint's count is for a lower value
	}
	return nil
}
