package postgrescdc

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// Metadata a postgres_cdc record carries.
const (
	metaPGLSN       = "postgres.lsn"
	metaPGOperation = "postgres.operation"
	metaPGSchema    = "postgres.schema"
	metaPGTable     = "postgres.table"
	metaPGKey       = "postgres.key"
)

// pgCDCSource streams a publication's changes through a logical
// replication slot with the pgoutput plugin. Each insert, update and
// delete is a record whose payload is the row as a JSON object (for a
// delete, the replica identity's columns; a TOASTed column an update left
// unchanged is absent from the payload unless the old row, sent under
// REPLICA IDENTITY FULL, holds it: warnUnchangedTOAST), with meta
// postgres.lsn (the transaction's commit LSN, as a decimal number: a
// version that grows with every transaction), postgres.operation
// (insert|update|delete, or truncate: one record per table a TRUNCATE
// emptied, with {} as its payload), postgres.schema, postgres.table and
// postgres.key (the key column's value, or a JSON array of the values of
// a composite key; absent for a table without a replica identity key). message_id is a hash of schema.table,
// key and commit LSN: a replayed change has the same id. A table whose
// replica identity is no key (none, or FULL: the whole row) adds the
// change's place in its transaction, so the rows one transaction inserts
// get ids of their own.
//
// Known edge, as the spec states it: a key changed twice in one
// transaction yields two records with one commit LSN and so one
// message_id. A dedup step on message_id drops the second; an upsert
// guarded by `WHERE excluded.lsn > t.lsn` skips it too (same LSN), leaving
// the row at the transaction's first change of it. Guard with `>=` to
// converge on the last change: a replay of a transaction repeats its
// changes in the same order.
//
// The slot holds the durable position: the source confirms (standby status
// updates, every second and when the server asks) the end LSN of the last
// transaction whose records are all acked, and on a graceful stop it sends
// that position and then advances the slot synchronously
// (pg_replication_slot_advance), so a restart replays nothing acked.
// Without that teardown (a crash), everything since the last status update
// is delivered again. checkpoint_store adds a second position, saved at
// every commit, that a restart resumes from when it is ahead of the slot.
//
// With snapshot = true the source first reads every published table
// (snapshot.go): the slot is created exporting its snapshot and each table
// is read in that snapshot in primary key order, in pages, while the
// replication connection waits; then changes stream from the slot's
// start. A snapshot row's payload is the row, postgres.operation is
// "snapshot", postgres.lsn is one below the slot's start (so any streamed
// change of the row is newer under an upsert guarded by `excluded.lsn >
// t.lsn`), and message_id is a UUIDv5 of the slot, schema.table and key. A
// row in the snapshot that is changed later has both records, under
// different ids: both are events. Until the snapshot is committed to its
// end the checkpoint holds the table and key of the last committed row
// (and the slot is not confirmed past its start); from then on, the LSN.
//
// The exported snapshot dies with the connection that exported it (and a
// transaction that imported it with its own), so a restart mid-snapshot,
// or a lost connection, cannot read the rest in it. It keeps the slot (and
// so every change since its start) and reads the rest, after the
// committed key, in a new REPEATABLE READ snapshot, then streams from the
// slot's start as before. A rerun does that from the checkpoint; the
// running route does the same when the snapshot's connection is lost
// (resumeSnapshot, through the same code: dial and openSnapshot), from the
// mark committed then, so what was handed over and not committed is read
// again under the same ids, and no mark past the committed one is ever
// saved. What the sink sees: rows committed before the
// crash as they were at the slot's start; rows read after it as they are
// then (the id of a row read again is its first read's, so an insert-once
// write keeps that first read); then every change since the slot's start,
// including those a late-read row already shows. Applied in order, by key
// and guarded by postgres.lsn, that ends at the tables' state, as a clean
// run does; an event log sees a row read late with changes it already
// holds streamed after it, and a row deleted before it was read only as
// its delete. A slot that exists when no checkpoint does (created ahead
// of the route) is handled the same way, from its confirmed position.
//
// The snapshot's table list is the catalog as it is when it is taken, not
// as the slot's snapshot saw it, and a table can join the publication at
// any time (snapshot.go, begin and joinedSince): one that joined after the
// slot's start and before the list makes the whole snapshot read in a new
// snapshot (the slot's lacks its changes from before it joined, which
// pgoutput never streams); one that joins while the tables are read is
// read after them in a new snapshot; the checkpoint's mark lists the
// tables in reading order, so a restart reads what its last run had not
// finished and what joined since. A table that joins after the snapshot
// ended streams from its joining, with a warning naming it. A snapshot
// row carries the columns the publication publishes, as a change does.
//
// Record.Seq is not a change's own LSN (changes of interleaved
// transactions arrive in commit order, not WAL order). Under positional
// naming (the route asks Replayable), it is commit LSN << 16 | the
// change's index in its transaction: the same on every replay, growing,
// with a gap between transactions, so a part file holds one transaction.
// That numbering needs commit LSNs below 2^48 (256 TiB of WAL) and at most
// 65536 changes per transaction; a transaction past either fails the route
// with an error saying so. Other routes number changes 0, 1, 2… per run,
// as they are handed over (at their transaction's commit: a transaction
// received in part, or replayed and dropped, takes no number).
//
// A lost replication connection while streaming (the server restarted or
// crashed, the connection cut, or silent for silenceTimeout: a network
// partition or a frozen walsender, which the server never ends) does not
// stop the route: receive reconnects, with a backoff from 100 ms doubling
// to 5 s, for as long as the route runs, and starts replication again at
// the end LSN of the last transaction the route committed (acked), not the
// last one handed over (emitted): the server skips every transaction that
// ends before the start, so a start past one not handed over loses it,
// while from the committed position each later transaction is either
// streamed (not handed over yet) or dropped (handed over); it is also the
// position the slot and the checkpoint resume from after a crash. The slot
// replays every transaction since; handOver drops whole each one that ends
// at or before emitted (handed over already in this run, it is in the
// engine), so nothing is handed over twice in one run and Seq goes on
// growing. Standby status updates confirm acked only. The answers a retry
// cannot heal (healable: the slot or publication gone, the slot
// invalidated, authentication refused, permission denied, the database
// gone) stop the route with an error naming the slot, as does any error of
// the source's own. Losing a temporary slot's connection still stops the
// route (the slot ends with it, and with it the changes since), and a
// rerun resumes from the checkpoint. With snapshot = true, losing the
// connection the snapshot is read in (or the replication connection, idle
// then) does not: the snapshot is read on in a new one, as above, with the
// same backoff and the same answers stopping the route (and a publication
// dropped meanwhile, which Open would create again). A connection that
// fails at Open stops the route.
type pgCDCSource struct {
	route       string
	node        string // the plan node's ID, for its premises
	log         *slog.Logger
	rawURL      string
	url         string
	publication string
	slot        string
	temporary   bool
	keepCP      bool   // checkpoint_store set: the route saves positions
	premise     string // the armed slot_kept premise's reason, for errors
	snapshot    bool   // snapshot = true: read the tables before streaming

	conn  *pgconn.PgConn
	start pglogrepl.LSN
	// silence is how long the stream may hear nothing from the server
	// before the connection is taken for lost (0: for ever); see stream.
	silence time.Duration
	recs    chan []runtime.Record // one transaction's records
	errs    chan error
	stop    context.CancelFunc
	done    chan struct{}
	closed  atomic.Bool

	acked      atomic.Uint64    // end LSN of the last transaction fully acked
	emitted    atomic.Uint64    // end LSN of the last transaction handed to the route
	seq        uint64           // the next Seq when not positional (snapshot rows, then handOver)
	replayed   int              // transactions replayed after a reconnect and dropped, not yet logged
	positional bool             // Replayable was asked: Seq = commit LSN<<16 | index
	pending    []runtime.Record // records read but not yet returned by Next
	relMu      sync.Mutex
	relation   map[uint32]*pglogrepl.RelationMessage

	// The snapshot phase (snapshot.go): snap is set by Open when there is
	// a snapshot to read; snapDone once it is read to its end, snapEnd
	// then the Seq of the first streamed change.
	snap     *snapshotState
	snapDone atomic.Bool
	snapEnd  atomic.Uint64
	// snapTables, set when this run read the snapshot to its end, are
	// the tables it read (schema.name); the stream warns once about each
	// other table it sees (lateTables), which joined the publication after
	// the snapshot: its rows from before it joined are in no record.
	snapTables map[string]bool
	lateTables map[string]bool
	// toastWarned: the tables whose updates left a TOASTed value out,
	// warned about once each (warnUnchangedTOAST).
	toastWarned map[string]bool
}

// pgCDCSourceConfig is a postgres_cdc source's attributes (stdlib
// declares them).
type pgCDCSourceConfig struct {
	URL           []plan.Part `attr:"url"` // rendered by renderStatic (env() allowed)
	Publication   string      `attr:"publication"`
	SlotName      string      `attr:"slot_name"`
	TemporarySlot bool        `attr:"temporary_slot"`
	// CheckpointStore, when set, adds a second position (see pgCDCSource);
	// the engine opens it.
	CheckpointStore string `attr:"checkpoint_store"`
	// Snapshot reads the published tables before streaming (snapshot.go).
	Snapshot bool `attr:"snapshot"`
}

func init() {
	runtime.RegisterSource("postgres_cdc", buildPGCDCSource, runtime.ChecksPremises(plan.PremisePrimaryKey))
}

// plainIdentRE is an unquoted SQL identifier: what a publication or slot
// name may be, spliced into the statements that create and advance them.
var plainIdentRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_$]*$`)

func buildPGCDCSource(b *runtime.BuildEnv, cfg *pgCDCSourceConfig) (runtime.Source, error) {
	raw, err := b.RenderStatic("url") // the node's url: env() is rendered
	if err != nil {
		return nil, err
	}
	switch scheme, _, _ := strings.Cut(raw, "://"); strings.ToLower(scheme) {
	case "postgres", "postgresql":
	default:
		return nil, b.Errorf("url", "%s: want postgres://user:pass@host/db", plan.RedactURLs(raw))
	}
	s := &pgCDCSource{route: b.Route(), node: b.NodeID(), log: b.Logger(), rawURL: raw, url: plan.RedactURLs(raw),
		publication: cfg.Publication, slot: cfg.SlotName,
		temporary: cfg.TemporarySlot, keepCP: cfg.CheckpointStore != "", snapshot: cfg.Snapshot, silence: silenceTimeout,
		recs: make(chan []runtime.Record, 64), errs: make(chan error, 1), done: make(chan struct{}),
		relation: map[uint32]*pglogrepl.RelationMessage{}}
	for _, f := range []struct{ attr, v string }{{"publication", cfg.Publication}, {"slot_name", cfg.SlotName}} {
		if f.v == "" {
			return nil, b.Errorf(f.attr, "required")
		}
		if !plainIdentRE().MatchString(f.v) {
			return nil, b.Errorf(f.attr, "%q is not a plain identifier", f.v)
		}
	}
	if s.snapshot && s.temporary {
		return nil, b.Errorf("snapshot", "a temporary slot disappears at a crash with the changes since the snapshot; use a permanent slot (temporary_slot = false)")
	}
	if s.snapshot && !s.keepCP {
		return nil, b.Errorf("snapshot", "needs checkpoint_store: the slot holds the stream's position, not how far the snapshot was read and committed")
	}
	return s, nil
}

func (s *pgCDCSource) Name() string { return s.slot }

// ArmPremise takes the slot_kept premise: Open checks it whether armed or
// not (a route resuming from a checkpoint stops when its slot is gone);
// arming gives the error the premise's reason.
func (s *pgCDCSource) ArmPremise(p plan.Premise) error {
	if p.Kind != plan.PremiseSlotKept {
		return fmt.Errorf("the postgres_cdc source cannot check a per-connection %s premise", p.Kind)
	}
	s.premise = p.Reason
	return nil
}

// Replayable is asked by a sink that names parts by source position (and
// only then): from then on changes are numbered by commit LSN and index.
// Not with snapshot = true: a snapshot read again after a crash is read in
// another snapshot, so its rows do not come back at the same positions.
func (s *pgCDCSource) Replayable() bool {
	if s.snapshot {
		return false
	}
	s.positional = true
	return true
}
func (s *pgCDCSource) RecordFormat() string { return "json" }
func (s *pgCDCSource) SeqGaps() bool        { return s.positional }

// Position is the committed LSN, kept in the checkpoint store only when
// checkpoint_store is set (otherwise the slot alone holds it).
func (s *pgCDCSource) Position(committed map[int32]runtime.AckPos) (checkpoint.Position, bool) {
	if !s.keepCP {
		return checkpoint.Position{}, false
	}
	c, ok := committed[0]
	lsn := c.Offset
	if s.snap != nil {
		if !s.snapDone.Load() || c.Next < s.snapEnd.Load() {
			return s.snapshotPosition(c, ok), true
		}
		lsn = max(lsn, int64(s.snap.lsn)) // every snapshot row committed
	}
	if a := int64(s.acked.Load()); a > lsn {
		lsn = a
	}
	return checkpoint.Position{Source: s.checkpointSource(), Mode: modeLSN, Offset: lsn}, true
}

func (s *pgCDCSource) checkpointSource() string { return "postgres_cdc:" + s.slot }

// Commit records how far the slot may be confirmed; the receive loop sends
// it to the server.
func (s *pgCDCSource) Commit(_ context.Context, changed map[int32]runtime.AckPos) error {
	if c, ok := changed[0]; ok && s.snap != nil && s.snapDone.Load() && c.Next >= s.snapEnd.Load() {
		// The snapshot is committed to its end (and the checkpoint says
		// so): the slot may now be confirmed past its start.
		s.acked.CompareAndSwap(0, uint64(s.snap.lsn))
	}
	if c, ok := changed[0]; ok && c.Offset > 0 {
		for {
			cur := s.acked.Load()
			if uint64(c.Offset) <= cur || s.acked.CompareAndSwap(cur, uint64(c.Offset)) {
				break
			}
		}
	}
	return nil
}

func (s *pgCDCSource) replicationURL() string {
	if strings.Contains(s.rawURL, "?") {
		return s.rawURL + "&replication=database"
	}
	return s.rawURL + "?replication=database"
}

// errorf is an error of the source, naming the route and the server
// (its password redacted). It wraps the first error among args, so
// healable can still tell what failed.
func (s *pgCDCSource) errorf(format string, args ...any) error {
	detail := plan.RedactURLs(fmt.Sprintf(format, args...))
	msg := fmt.Sprintf("route %s: postgres_cdc source %s: %s", s.route, s.url, detail)
	for _, a := range args {
		if err, ok := a.(error); ok {
			return &sourceError{msg: msg, detail: detail, err: err}
		}
	}
	return &sourceError{msg: msg, detail: detail}
}

// sourceError is an error of the source (detail: without the route and
// the server) with the error it wraps, if any.
type sourceError struct {
	msg, detail string
	err         error
}

// detail is err's text without the route and the server when it is the
// source's own (errorf), to quote it in another.
func detail(err error) string {
	var se *sourceError
	if errors.As(err, &se) {
		return se.detail
	}
	return err.Error()
}

func (e *sourceError) Error() string { return e.msg }
func (e *sourceError) Unwrap() error { return e.err }

func (s *pgCDCSource) Open(ctx context.Context, cp checkpoint.Position, haveCP bool, _ runtime.SourceHost) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	plain, slotExists, err := s.dial(cctx, true)
	if plain != nil {
		defer plain.Close(context.Background())
	}
	if err != nil {
		return err
	}
	if s.snapshot && !(haveCP && cp.Source == s.checkpointSource() && cp.Mode == modeLSN) {
		var from snapMark
		var start pglogrepl.LSN
		if haveCP && cp.Source == s.checkpointSource() && strings.HasPrefix(cp.Mode, modeSnapshot) {
			if from, err = parseSnapshotMode(cp.Mode); err != nil {
				return s.errorf("%v", err)
			}
			start = pglogrepl.LSN(cp.Offset)
		}
		return s.openSnapshot(cctx, plain, slotExists, from, start)
	}
	resumes := haveCP && cp.Source == "postgres_cdc:"+s.slot && cp.Offset > 0
	if !slotExists && resumes && !s.temporary {
		// A slot made now would start at the server's current position:
		// the changes after the checkpoint's were in the slot that is gone.
		msg := fmt.Sprintf("slot %s is gone (dropped, or never made on this server), and with it the changes after %s, where the route's checkpoint stands: a new slot would start at the server's current position and pass over them without a word, so the route stops. To go on from now, accepting their loss, drop the route's checkpoint (mqbc state reset) and run it again",
			s.slot, pglogrepl.LSN(cp.Offset))
		if s.premise != "" {
			msg += "; the plan's premise slot_kept is broken (" + s.premise + ")"
		}
		return s.errorf("%s", msg)
	}
	if !slotExists {
		res, err := pglogrepl.CreateReplicationSlot(cctx, s.conn, s.slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Temporary: s.temporary, Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil {
			return s.errorf("create slot %s: %v", s.slot, err)
		}
		s.log.Info("created replication slot", "slot", s.slot, "temporary", s.temporary, "consistent_point", res.ConsistentPoint)
	}
	if resumes {
		// The server starts at the later of this and the slot's
		// confirmed position.
		s.start = pglogrepl.LSN(cp.Offset)
		s.acked.Store(uint64(cp.Offset))
		s.log.Info("resuming from checkpoint", "lsn", s.start.String())
	}
	return s.startStream(cctx)
}

// dial opens a plain connection (returned, for the caller to close) and
// the replication connection (s.conn), and reports whether the slot
// exists. A missing publication is created (FOR ALL TABLES) when create
// is set, as Open does; otherwise (a snapshot resumed after a lost
// connection) it is an error a retry cannot heal. A failure of a
// connection is a linkError, which healable judges.
func (s *pgCDCSource) dial(ctx context.Context, create bool) (plain *pgconn.PgConn, slotExists bool, err error) {
	if plain, err = pgconn.Connect(ctx, s.rawURL); err != nil {
		return nil, false, s.errorf("connect: %v", &linkError{err})
	}
	exists := func(q string) (bool, error) {
		res, err := plain.Exec(ctx, q).ReadAll()
		if err != nil {
			return false, lostOn(err, plain)
		}
		return len(res) > 0 && len(res[0].Rows) > 0, nil
	}
	ok, err := exists(`SELECT 1 FROM pg_publication WHERE pubname = '` + s.publication + `'`)
	if err != nil {
		return plain, false, s.errorf("look up publication %s: %v", s.publication, err)
	}
	if !ok {
		if !create {
			return plain, false, s.errorf("publication %s does not exist (dropped while the snapshot was read)", s.publication)
		}
		if _, err := plain.Exec(ctx, `CREATE PUBLICATION `+s.publication+` FOR ALL TABLES`).ReadAll(); err != nil {
			return plain, false, s.errorf("create publication %s: %v", s.publication, lostOn(err, plain))
		}
		s.log.Info("created publication", "publication", s.publication)
	}
	if s.conn, err = pgconn.Connect(ctx, s.replicationURL()); err != nil {
		s.conn = nil
		return plain, false, s.errorf("replication connection: %v", &linkError{err})
	}
	if !s.temporary {
		if slotExists, err = exists(`SELECT 1 FROM pg_replication_slots WHERE slot_name = '` + s.slot + `'`); err != nil {
			return plain, false, s.errorf("look up slot %s: %v", s.slot, err)
		}
	}
	return plain, slotExists, nil
}

// lostOn makes err, the failure of a statement on conns, a linkError when
// it is the connection's: an answer of the server (a PgError, whose code
// healable judges) or none, the connection closed (pgconn closes it on a
// network error). Any other error (the source's own) is returned as is.
func lostOn(err error, conns ...*pgconn.PgConn) error {
	var le *linkError
	var pe *pgconn.PgError
	switch {
	case err == nil || errors.As(err, &le):
		return err
	case errors.As(err, &pe):
		return &linkError{err}
	}
	for _, c := range conns {
		if c != nil && c.IsClosed() {
			return &linkError{err}
		}
	}
	return err
}

// Reconnecting after the replication connection is lost: the first try
// after reconnectFirst, each next one after twice the wait, up to
// reconnectMax, until the route stops.
const (
	reconnectFirst = 100 * time.Millisecond
	reconnectMax   = 5 * time.Second
)

// silenceTimeout is how long a replication connection may bring nothing
// at all from the server before it is taken for lost (a network partition,
// a frozen walsender: the connection stays open and silent, and the server
// side, if it is frozen, never ends it). An idle walsender sends a
// keepalive at least every wal_sender_timeout/2, and after a third of this
// silence the source asks for one with every status update (reply
// requested), which a live walsender answers at once; so only a server
// that answers nothing for this long is left. A variable so tests can
// shorten it; each source takes its value when built.
var silenceTimeout = 30 * time.Second

// linkError is a failure of the replication connection itself: connecting,
// starting replication, receiving, sending a status update, or the server
// ending the stream. A reconnect may heal it, unless the server's answer
// says it cannot (healable).
type linkError struct{ err error }

func (e *linkError) Error() string { return e.err.Error() }
func (e *linkError) Unwrap() error { return e.err }

// healable reports whether a reconnect may heal err: a failure of the
// connection (linkError) without an answer from the server (refused,
// reset, closed, timed out), or with one that passes (the server shutting
// down, starting up or in recovery, too many connections, the slot still
// held by the walsender of the lost connection). Every other answer
// cannot heal by retrying: the slot or publication gone (42704), the
// slot invalidated (55000), authentication refused (class 28),
// permission denied (42501), the database gone (3D000, 57P04). Nor can an
// error of the source's own (a message it cannot decode).
func healable(err error) bool {
	var le *linkError
	if !errors.As(err, &le) {
		return false
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return true
	}
	switch {
	case pe.Code == "57P04": // database dropped
		return false
	case strings.HasPrefix(pe.Code, "57"), // operator intervention: shutdown, cannot connect now, cancel
		strings.HasPrefix(pe.Code, "08"), // connection exception
		strings.HasPrefix(pe.Code, "53"), // insufficient resources: too many connections, out of memory
		pe.Code == "55006":               // object in use: the lost connection's walsender still holds the slot
		return true
	}
	return false
}

// startReplication starts streaming the slot on conn from the LSN from
// (the server starts at the later of it and the slot's confirmed
// position).
func (s *pgCDCSource) startReplication(ctx context.Context, conn *pgconn.PgConn, from pglogrepl.LSN) error {
	err := pglogrepl.StartReplication(ctx, conn, s.slot, from, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names '" + s.publication + "'"},
	})
	if err != nil {
		return &linkError{fmt.Errorf("start replication on slot %s at %s: %w", s.slot, from, err)}
	}
	return nil
}

// startStream starts replication at s.start and the receive loop. After
// the snapshot (which may have taken a while), a connection lost in the
// meantime is reconnected as one lost while streaming is.
func (s *pgCDCSource) startStream(ctx context.Context) error {
	err := s.startReplication(ctx, s.conn, s.start)
	if err != nil && (s.snap == nil || !healable(err)) {
		return s.errorf("%v", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.receive(rctx, err)
	return nil
}

// restartLSN is where the stream starts again after a lost connection:
// the end of the last transaction the route committed (never what was
// only handed over, whose records may not be delivered yet), or where
// this run started streaming when it committed nothing yet.
func (s *pgCDCSource) restartLSN() pglogrepl.LSN {
	return pglogrepl.LSN(max(s.acked.Load(), uint64(s.start)))
}

// receive runs the stream until ctx ends (lost is the error that ended a
// first start, if any). A lost connection is reconnected (reconnect) and
// the stream resumed; the route stops, with an error naming the slot,
// when the loss cannot heal (healable), when the slot is temporary (it
// ended with the connection, and with it every change since) or on an
// error of the source's own.
func (s *pgCDCSource) receive(ctx context.Context, lost error) {
	defer close(s.done)
	fail := func(err error) {
		if ctx.Err() != nil {
			return
		}
		if s.temporary && healable(err) {
			err = fmt.Errorf("%w; temporary slot %s ended with its connection, and the changes since with it, so the stream cannot resume: the route stops (a rerun creates the slot again; use a permanent slot to ride through an outage)", err, s.slot)
		}
		select {
		case s.errs <- s.errorf("slot %s: %v", s.slot, err):
		default:
		}
	}
	err := lost
	for {
		if err == nil {
			err = s.stream(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if s.temporary || !healable(err) {
			fail(err)
			return
		}
		if err = s.reconnect(ctx, err); err != nil {
			fail(err)
			return
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// reconnect replaces the lost replication connection. It tries again and
// again, with a backoff from reconnectFirst doubling up to reconnectMax,
// until replication starts, the route stops (ctx; nil is returned) or the
// server answers what a retry cannot heal (returned). The stream starts
// again at restartLSN, the position the route committed: the slot then
// replays the transactions handed over since, which stream drops.
func (s *pgCDCSource) reconnect(ctx context.Context, lost error) error {
	if s.conn != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		s.conn.Close(cctx)
		cancel()
	}
	s.log.Warn("replication connection lost; reconnecting", "slot", s.slot,
		"committed", s.restartLSN().String(), "handed_over", pglogrepl.LSN(s.emitted.Load()).String(), "err", plan.RedactURLs(lost.Error()))
	wait := reconnectFirst
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, reconnectMax)
		from := s.restartLSN()
		conn, err := s.connectAndStart(ctx, from)
		if err == nil {
			s.conn = conn
			s.log.Info("replication reconnected", "slot", s.slot, "from", from.String(), "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		if !healable(err) {
			return err
		}
		if attempt == 1 || attempt%10 == 0 {
			s.log.Warn("reconnecting the replication connection", "slot", s.slot, "attempts", attempt, "err", plan.RedactURLs(err.Error()))
		}
	}
}

// connectAndStart opens a replication connection and starts the slot's
// stream on it at from.
func (s *pgCDCSource) connectAndStart(ctx context.Context, from pglogrepl.LSN) (*pgconn.PgConn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(cctx, s.replicationURL())
	if err != nil {
		return nil, &linkError{fmt.Errorf("replication connection: %w", err)}
	}
	if err := s.startReplication(cctx, conn, from); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// stream reads the replication stream on s.conn until ctx ends (nil) or
// the stream fails, assembling each transaction's records and handing
// them over at its commit (handOver). A transaction received in part when
// the connection is lost is dropped: the slot replays it whole.
func (s *pgCDCSource) stream(ctx context.Context) error {
	var (
		txn      []runtime.Record
		commit   pglogrepl.LSN
		lastSent uint64
	)
	// sendStatus confirms acked, what the route committed: never a
	// transaction only handed over, whose records a crash could lose.
	// reply asks the server to answer at once (with a keepalive); it is
	// sent then even when nothing is acked yet (position 0 confirms
	// nothing).
	sendStatus := func(force, reply bool) error {
		pos := s.acked.Load()
		if !reply && (pos == 0 || (!force && pos == lastSent)) {
			return nil
		}
		if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pglogrepl.LSN(pos), ReplyRequested: reply}); err != nil {
			return &linkError{fmt.Errorf("standby status update: %w", err)}
		}
		lastSent = pos
		return nil
	}
	// heard is when the last message came from the server: after
	// s.silence without one, the connection is taken for lost (see
	// silenceTimeout), and from a third of it on every status update asks
	// for a reply.
	heard := time.Now()
	tick := time.Now().Add(time.Second)
	for ctx.Err() == nil {
		if time.Now().After(tick) {
			if err := sendStatus(true, s.silence > 0 && time.Since(heard) >= s.silence/3); err != nil {
				return err
			}
			tick = time.Now().Add(time.Second)
		}
		until := tick
		if s.silence > 0 && heard.Add(s.silence).Before(until) {
			until = heard.Add(s.silence)
		}
		rctx, cancel := context.WithDeadline(ctx, until)
		msg, err := s.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) && !s.conn.IsClosed() {
				if s.silence > 0 && time.Since(heard) >= s.silence {
					return &linkError{fmt.Errorf("nothing received from the server for %s, not even the keepalive asked for: the connection is taken for lost", s.silence)}
				}
				continue
			}
			return &linkError{fmt.Errorf("receive: %w", err)}
		}
		heard = time.Now()
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			return &linkError{fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(m))}
		case *pgproto3.CopyDone, *pgproto3.CommandComplete:
			// The walsender ends the stream this way at a server's
			// shutdown.
			return &linkError{errors.New("the server ended the replication stream")}
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return err
				}
				// Nothing handed over is uncommitted and no transaction is
				// open: the slot may move up to what the server has sent
				// (WAL of tables outside the publication). Every
				// transaction that ends there was sent before this.
				if txn == nil && s.acked.Load() == s.emitted.Load() && uint64(ka.ServerWALEnd) > s.acked.Load() {
					s.acked.Store(uint64(ka.ServerWALEnd))
					s.emitted.Store(uint64(ka.ServerWALEnd))
				}
				if ka.ReplyRequested {
					if err := sendStatus(true, false); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return err
				}
				lm, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					return fmt.Errorf("decode pgoutput message: %w", err)
				}
				switch lm := lm.(type) {
				case *pglogrepl.RelationMessage:
					s.relMu.Lock()
					s.relation[lm.RelationID] = lm
					s.relMu.Unlock()
					s.warnLateTable(lm.Namespace + "." + lm.RelationName)
				case *pglogrepl.BeginMessage:
					txn, commit = []runtime.Record{}, lm.FinalLSN
				case *pglogrepl.InsertMessage:
					if err := s.change(&txn, commit, "insert", lm.RelationID, lm.Tuple, nil); err != nil {
						return err
					}
				case *pglogrepl.UpdateMessage:
					if err := s.change(&txn, commit, "update", lm.RelationID, lm.NewTuple, lm.OldTuple); err != nil {
						return err
					}
				case *pglogrepl.DeleteMessage:
					if err := s.change(&txn, commit, "delete", lm.RelationID, lm.OldTuple, nil); err != nil {
						return err
					}
				case *pglogrepl.TruncateMessage:
					if err := s.truncate(&txn, commit, lm.RelationIDs); err != nil {
						return err
					}
				case *pglogrepl.CommitMessage:
					if !s.handOver(ctx, txn, uint64(lm.TransactionEndLSN)) {
						return nil
					}
					txn = nil
				}
			}
		}
	}
	return nil
}

// handOver hands a transaction's records, ending at the LSN end, over to
// Next (false: ctx ended first). A transaction that ends at or before
// the last one handed over (emitted) was handed over before the
// connection was lost, and the slot replays it because the route has not
// committed it: it is dropped whole, so nothing is handed over twice in
// one run. Records are numbered here, so a dropped transaction takes no
// Seq: without positional naming, Seq counts the records handed over
// (0, 1, 2… per run); with it, Seq is commit LSN << 16 | index, set by
// change, the same on every replay.
func (s *pgCDCSource) handOver(ctx context.Context, txn []runtime.Record, end uint64) bool {
	if end <= s.emitted.Load() {
		s.replayed++ // handed over already
		return true
	}
	if s.replayed > 0 {
		s.log.Info("dropped the transactions the slot replayed after the reconnect: they were handed over before the connection was lost",
			"slot", s.slot, "transactions", s.replayed)
		s.replayed = 0
	}
	if len(txn) > 0 {
		prev := int64(s.emitted.Load())
		for i := range txn {
			if !s.positional {
				txn[i].Seq = s.seq
				s.seq++
			}
			txn[i].Next = prev // resuming there replays the transaction
		}
		txn[len(txn)-1].Next = int64(end)
		select {
		case s.recs <- txn:
		case <-ctx.Done():
			return false
		}
	}
	if len(txn) > 0 || s.acked.Load() == s.emitted.Load() {
		s.emitted.Store(end)
		if len(txn) == 0 {
			s.acked.Store(end) // an empty transaction: nothing to wait for
		}
	}
	return true
}

// warnLateTable warns, once per table and run, when a change streams for
// a table the snapshot this run read did not read: it joined the
// publication after the snapshot ended, so its changes stream from when
// it joined, and its rows from before are in no record.
func (s *pgCDCSource) warnLateTable(table string) {
	if s.snapTables == nil || s.snapTables[table] || s.lateTables[table] {
		return
	}
	if s.lateTables == nil {
		s.lateTables = map[string]bool{}
	}
	s.lateTables[table] = true
	s.log.Warn("a table joined the publication after the snapshot was read: its changes stream from when it joined, and its rows from before are in no record; to read them, snapshot it with a route of its own (a new slot, snapshot = true, a publication of that table)",
		"publication", s.publication, "table", table)
}

// warnUnchangedTOAST warns, once per table, that an update left columns
// out of its record: PostgreSQL does not send a TOASTed value (a large
// one, stored apart) an update did not change, and without REPLICA
// IDENTITY FULL no old row holds it either.
func (s *pgCDCSource) warnUnchangedTOAST(table string, cols []string) {
	if s.toastWarned[table] {
		return
	}
	if s.toastWarned == nil {
		s.toastWarned = map[string]bool{}
	}
	s.toastWarned[table] = true
	s.log.Warn(fmt.Sprintf("postgres_cdc: an update of %s left its unchanged large (TOASTed) values of %s out of the record, as PostgreSQL sends them: a sink that writes those fields from the payload writes NULL (an upsert's DO UPDATE SET would erase them). ALTER TABLE %s REPLICA IDENTITY FULL makes the server send the old row, which the source fills them from; or leave those columns out of the update", table, strings.Join(cols, ", "), table),
		"route", s.route, "table", table)
}

// change turns one row change into a record of the open transaction.
func (s *pgCDCSource) change(txn *[]runtime.Record, commit pglogrepl.LSN, op string, relID uint32, tuple, old *pglogrepl.TupleData) error {
	s.relMu.Lock()
	rel := s.relation[relID]
	s.relMu.Unlock()
	if rel == nil {
		return fmt.Errorf("change to unknown relation %d", relID)
	}
	if tuple == nil {
		return fmt.Errorf("%s on %s.%s without row data", op, rel.Namespace, rel.RelationName)
	}
	row := make(map[string]json.RawMessage, len(tuple.Columns))
	var unsent []string // unchanged TOASTed columns no old row holds
	defer func() {
		if len(unsent) > 0 {
			s.warnUnchangedTOAST(rel.Namespace+"."+rel.RelationName, unsent)
		}
	}()
	var keys []string
	var keyJSON []json.RawMessage
	for i, col := range tuple.Columns {
		if i >= len(rel.Columns) {
			break
		}
		rc := rel.Columns[i]
		var v json.RawMessage
		switch col.DataType {
		case 'n':
			v = json.RawMessage("null")
		case 'u':
			// An unchanged TOASTed value is not sent. The old row, sent
			// in full under REPLICA IDENTITY FULL, may hold it.
			if old == nil || i >= len(old.Columns) || old.Columns[i].DataType != 't' {
				unsent = append(unsent, rc.Name)
				continue
			}
			v = pgTextToJSON(rc.DataType, old.Columns[i].Data)
		case 't':
			v = pgTextToJSON(rc.DataType, col.Data)
		default:
			v, _ = json.Marshal(string(col.Data))
		}
		row[rc.Name] = v
		if rc.Flags&1 != 0 && col.DataType == 't' {
			keys = append(keys, string(col.Data))
			keyJSON = append(keyJSON, v)
		}
	}
	payload, err := json.Marshal(row)
	if err != nil {
		return err
	}
	return s.addChange(txn, commit, rel, op, payload, keys, keyJSON)
}

// truncate turns a TRUNCATE into one record per table it emptied, with
// postgres.operation "truncate" and an empty object as the payload: a
// sink keyed on a row's fields refuses it (to the DLQ, or stopping the
// route) rather than the warehouse keeping rows the source no longer
// has without a word; a route that means to ignore it filters it out.
func (s *pgCDCSource) truncate(txn *[]runtime.Record, commit pglogrepl.LSN, relIDs []uint32) error {
	for _, id := range relIDs {
		s.relMu.Lock()
		rel := s.relation[id]
		s.relMu.Unlock()
		if rel == nil {
			return fmt.Errorf("truncate of unknown relation %d", id)
		}
		if err := s.addChange(txn, commit, rel, "truncate", []byte("{}"), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// addChange appends a change of rel to the open transaction: its record,
// meta and message_id (see pgCDCSource).
func (s *pgCDCSource) addChange(txn *[]runtime.Record, commit pglogrepl.LSN, rel *pglogrepl.RelationMessage, op string, payload []byte, keys []string, keyJSON []json.RawMessage) error {
	key := ""
	switch len(keys) {
	case 0:
	case 1:
		key = keys[0]
	default:
		b, _ := json.Marshal(keyJSON)
		key = string(b)
	}
	lsn := strconv.FormatUint(uint64(commit), 10)
	r := runtime.Record{Payload: payload} // Seq: set here when positional, else by handOver
	if s.positional {
		if uint64(commit) >= 1<<48 || len(*txn) >= 1<<16 {
			return fmt.Errorf("transaction committed at %s: more than 65536 changes or an LSN past 2^48 cannot be numbered for name_by = source_position", commit)
		}
		r.Seq = uint64(commit)<<16 | uint64(len(*txn))
	}
	r.Meta = map[string]string{metaPGLSN: lsn, metaPGOperation: op, metaPGSchema: rel.Namespace, metaPGTable: rel.RelationName}
	if len(keys) > 0 {
		r.Meta[metaPGKey] = key
	}
	h := sha256.New()
	h.Write([]byte(rel.Namespace + "." + rel.RelationName + "\x00" + key + "\x00" + lsn))
	if len(keys) == 0 || rel.ReplicaIdentity == 'f' || rel.ReplicaIdentity == 'n' {
		// No key tells this row from the others the transaction changed
		// (no replica identity, or REPLICA IDENTITY FULL, whose "key" is
		// the whole row: two equal rows share it): the change's place in
		// its transaction does, the same on every replay, as a slot
		// decodes a transaction the same way each time. Without it every
		// row of a multi-row insert would share one id, and a dedup or a
		// sink keyed on message_id would keep the first and drop the rest.
		h.Write([]byte("\x00#" + strconv.Itoa(len(*txn))))
	}
	var id uuid.UUID
	copy(id[:], h.Sum(nil))
	id[6] = (id[6] & 0x0f) | 0x80
	id[8] = (id[8] & 0x3f) | 0x80
	r.SetMessageID(id)
	*txn = append(*txn, r)
	return nil
}

// pgTextToJSON keeps numbers, booleans and JSON columns in their JSON form
// and turns everything else into a string.
func pgTextToJSON(oid uint32, data []byte) json.RawMessage {
	switch oid {
	case 20, 21, 23, 26, 700, 701, 1700: // int8, int2, int4, oid, float4, float8, numeric
		if json.Valid(data) {
			return json.RawMessage(data)
		}
	case 16: // bool
		if len(data) == 1 && data[0] == 't' {
			return json.RawMessage("true")
		}
		return json.RawMessage("false")
	case 114, 3802: // json, jsonb
		return json.RawMessage(data)
	}
	b, _ := json.Marshal(string(data))
	return b
}

func (s *pgCDCSource) Next(ctx context.Context, max int) (*runtime.Batch, bool, error) {
	for len(s.pending) == 0 && s.snap != nil && !s.snapDone.Load() {
		if err := s.nextSnapshot(ctx); err != nil {
			if ctx.Err() != nil {
				return runtime.NewBatch(0), false, nil // the route is ending
			}
			return nil, false, err
		}
	}
	for len(s.pending) == 0 {
		select {
		case <-ctx.Done():
			return runtime.NewBatch(0), false, nil
		case err := <-s.errs:
			return nil, false, err
		case txn := <-s.recs:
			s.pending = txn
		}
	}
	// Whole transactions while they fit, then what is already waiting.
	b := runtime.NewBatch(min(len(s.pending), max))
	for len(s.pending) > 0 && b.Len() < max {
		n := min(len(s.pending), max-b.Len())
		for _, r := range s.pending[:n] {
			b.Add(r)
		}
		s.pending = s.pending[n:]
		if len(s.pending) == 0 && b.Len() < max {
			select {
			case txn := <-s.recs:
				s.pending = txn
			default:
			}
		}
	}
	return b, false, nil
}

// Close stops the stream; for a permanent slot it confirms the acked
// position, ends the replication connection and then advances the slot to
// that position synchronously, so a graceful stop leaves nothing acked to
// replay.
func (s *pgCDCSource) Close() error {
	if !s.closed.CompareAndSwap(false, true) || s.conn == nil {
		return nil
	}
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	if s.snap != nil && !s.snapDone.Load() {
		s.snap.conn.Close(context.Background())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	pos := pglogrepl.LSN(s.acked.Load())
	if pos > 0 && !s.conn.IsClosed() {
		pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos})
	}
	s.conn.Close(ctx)
	if s.temporary || pos == 0 {
		return nil
	}
	plain, err := pgconn.Connect(ctx, s.rawURL)
	if err != nil {
		return s.errorf("advance slot %s: connect: %v", s.slot, err)
	}
	defer plain.Close(context.Background())
	// The walsender lets go of the slot a moment after the connection
	// closes; until then the slot is active and cannot be advanced.
	q := `SELECT pg_replication_slot_advance('` + s.slot + `', '` + pos.String() + `'::pg_lsn)
		FROM pg_replication_slots WHERE slot_name = '` + s.slot + `' AND confirmed_flush_lsn < '` + pos.String() + `'::pg_lsn`
	for {
		_, err := plain.Exec(ctx, q).ReadAll()
		if err == nil {
			return nil
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55006" || ctx.Err() != nil { // 55006: object in use
			return s.errorf("advance slot %s to %s: %v", s.slot, pos, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
