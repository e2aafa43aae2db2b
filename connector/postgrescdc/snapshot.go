package postgrescdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// snapshotPage is how many rows one keyset query of the snapshot reads.
const snapshotPage = 1000

// Mode values of the checkpoint: a position in the stream (Offset is an
// LSN) or in the snapshot (the rest of Mode is a snapMark in JSON, Offset
// the LSN the stream starts at once the snapshot is read).
const (
	modeLSN      = "lsn"
	modeSnapshot = "snapshot:"
)

// opSnapshot is postgres.operation on a row read by the snapshot.
const opSnapshot = "snapshot"

// snapshotIDSpace is the UUIDv5 name space of snapshot rows' message_ids.
var snapshotIDSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("mqb:postgres_cdc:snapshot"))

// snapshotNameRE is what an exported snapshot's name looks like
// (00000003-00000002-1): it is spliced into SET TRANSACTION SNAPSHOT.
var snapshotNameRE = regexp.MustCompile(`^[0-9A-Fa-f-]+$`)

// snapTable is one published table the snapshot reads, in primary key
// order.
type snapTable struct {
	schema, name string
	keys         []string // the primary key's columns, in key order
	// cols are the columns the publication publishes, in table order:
	// what a streamed change of the table carries, so a snapshot row
	// carries the same (a column list's columns; no generated column
	// before PostgreSQL 18, whose pgoutput never sends one).
	cols []string
}

func (t snapTable) qualified() string { return t.schema + "." + t.name }

func (t snapTable) quoted() string { return quoteIdent(t.schema) + "." + quoteIdent(t.name) }

// before orders tables as the snapshot reads them: by schema, then name,
// byte by byte (not by a collation, so every run agrees).
func (t snapTable) before(schema, name string) bool {
	if t.schema != schema {
		return t.schema < schema
	}
	return t.name < name
}

// snapMark is where a snapshot row stands: its table and its key (the
// primary key columns' values as PostgreSQL prints them), and the tables
// the snapshot reads, in the order it reads them (schema.name): every
// table before the mark's is read. A mark with no table is the start of
// the snapshot. (A mark written before Tables existed has none: the
// tables before its own in name order are read.)
type snapMark struct {
	Schema string   `json:"s,omitempty"`
	Table  string   `json:"t,omitempty"`
	Key    []string `json:"k,omitempty"`
	Tables []string `json:"ts,omitempty"`
}

// seqMark ties a record's Seq to its mark.
type seqMark struct {
	seq  uint64
	mark snapMark
}

// snapshotState is the snapshot phase of a source opened with snapshot =
// true and no stream position yet.
type snapshotState struct {
	conn   *pgconn.PgConn // holds the REPEATABLE READ transaction
	tables []snapTable    // in reading order: the tables read, being read and to read
	names  []string       // tables' qualified names, for the marks (replaced, never appended to in place)
	ti     int            // the table being read
	after  []string       // key of the last row read from tables[ti]; nil: none yet
	lsn    pglogrepl.LSN

	mu sync.Mutex
	// from is where the reading started: the last run's committed mark,
	// or, after a lost connection, the mark committed then.
	from snapMark
	// committed is the mark of the last committed row (from until one
	// is): what a resumed read starts after.
	committed snapMark
	marks     []seqMark // rows handed out and not yet committed past, by Seq
}

// quoteIdent quotes a SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// snapshotRowLSN is postgres.lsn on every snapshot row: one below the LSN
// the stream starts at, so a change streamed afterwards (its commit LSN
// at or past that start) is newer under an upsert guarded by
// `excluded.lsn > t.lsn`, and a snapshot row delivered again is not.
func (st *snapshotState) snapshotRowLSN() string { return strconv.FormatUint(uint64(st.lsn)-1, 10) }

// openSnapshot starts the snapshot phase. With no checkpoint and no slot,
// it creates the slot exporting its snapshot and reads the tables in that
// snapshot: exactly the rows committed before the slot's start, every
// later change then streamed. Otherwise (a restart before the snapshot was
// read to its end, a lost connection while it was read: resumeSnapshot,
// or a slot that already existed) that snapshot is gone
// with the connection that exported it: the tables are read, from the
// committed mark on, in a new REPEATABLE READ snapshot, and the stream
// starts at the slot's start all the same, so every change since is
// delivered after the rows (see pgCDCSource).
func (s *pgCDCSource) openSnapshot(ctx context.Context, plain *pgconn.PgConn, slotExists bool, from snapMark, start pglogrepl.LSN) error {
	// Refuse a table without a primary key before creating anything.
	if _, err := publishedTables(ctx, plain, s.publication); err != nil {
		return s.errorf("snapshot: %v", lostOn(err, plain))
	}
	exported := ""
	switch {
	case start != 0:
		if !slotExists {
			return s.errorf("slot %s is gone, so the changes since %s that the snapshot in progress relies on cannot be streamed; drop the route's checkpoint (mqbc state) to snapshot again from scratch", s.slot, start)
		}
	case slotExists:
		res := plain.ExecParams(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL`,
			[][]byte{[]byte(s.slot)}, nil, nil, nil).Read()
		if res.Err != nil || len(res.Rows) == 0 {
			return s.errorf("read the start of slot %s: %v (not a logical slot?)", s.slot, res.Err)
		}
		var err error
		if start, err = pglogrepl.ParseLSN(string(res.Rows[0][0])); err != nil {
			return s.errorf("slot %s: %v", s.slot, err)
		}
		s.log.Info("slot exists without a snapshot position: reading the tables in a new snapshot, then every change since the slot's position", "slot", s.slot, "lsn", start.String())
	default:
		res, err := pglogrepl.CreateReplicationSlot(ctx, s.conn, s.slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
		if err != nil {
			return s.errorf("create slot %s: %v", s.slot, err)
		}
		if start, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
			return s.errorf("slot %s: consistent point: %v", s.slot, err)
		}
		if !snapshotNameRE.MatchString(res.SnapshotName) {
			return s.errorf("slot %s: unexpected snapshot name %q", s.slot, res.SnapshotName)
		}
		exported = res.SnapshotName
		s.log.Info("created replication slot exporting its snapshot", "slot", s.slot, "consistent_point", start.String(), "snapshot", exported)
	}
	if start <= 1 {
		return s.errorf("slot %s starts at %s: not a position to stream from", s.slot, start)
	}
	sc, err := pgconn.Connect(ctx, s.rawURL)
	if err != nil {
		return s.errorf("snapshot connection: %v", &linkError{err})
	}
	st := &snapshotState{conn: sc, lsn: start, from: from, committed: from}
	late, err := st.begin(ctx, exported, s.publication)
	if err != nil {
		err = lostOn(err, sc)
		sc.Close(context.Background())
		return s.errorf("snapshot: %v", err)
	}
	if len(late) > 0 {
		s.log.Warn("tables joined the publication after the slot's start, so the slot's snapshot lacks their changes from before they joined: reading every table in a new snapshot instead, and the stream from the slot's start brings each row to its latest state",
			"publication", s.publication, "tables", strings.Join(late, ", "))
	}
	st.resume(from)
	if s.snap != nil {
		s.snap.adopt(st) // resumed after a lost connection (resumeSnapshot)
	} else {
		s.snap = st
	}
	s.start = start
	s.emitted.Store(uint64(start))
	s.log.Info("snapshot", "tables", len(st.tables), "from_table", from.Schema+"."+from.Table, "stream_from", start.String())
	return nil
}

// begin opens the snapshot's transaction (in the exported snapshot when
// there is one) and lists the publication's tables, in name order.
//
// The list is the catalog as it is now (pg_publication_tables reads the
// latest catalog, not the transaction's snapshot), so a table that joined
// the publication after the slot's start is on it while the exported
// snapshot predates its joining: its changes between the slot's start and
// its joining would be neither in the rows read nor streamed. When a
// listed table was not in the publication as the exported snapshot sees
// it (late names them), begin reads in a new snapshot instead, taken after
// every listed table joined, as a restart does: rows read later than the
// slot's start, and the stream from the slot's start brings each to its
// latest state. When it cannot tell, it does the same.
func (st *snapshotState) begin(ctx context.Context, exported, publication string) (late []string, err error) {
	if err := st.beginTx(ctx, exported); err != nil {
		return nil, err
	}
	if st.tables, err = publishedTables(ctx, st.conn, publication); err != nil {
		return nil, err
	}
	if exported != "" {
		members, err := membersInSnapshot(ctx, st.conn, publication)
		for _, t := range st.tables {
			if err != nil || !members[t.qualified()] {
				late = append(late, t.qualified())
			}
		}
		if len(late) > 0 {
			st.conn.Exec(ctx, `ROLLBACK`).ReadAll()
			if err := st.beginTx(ctx, ""); err != nil {
				return nil, err
			}
			if st.tables, err = publishedTables(ctx, st.conn, publication); err != nil {
				return nil, err
			}
		}
	}
	st.names = make([]string, len(st.tables))
	for i, t := range st.tables {
		st.names[i] = t.qualified()
	}
	return late, nil
}

// beginTx begins a REPEATABLE READ transaction on the snapshot's
// connection, in the exported snapshot when there is one.
func (st *snapshotState) beginTx(ctx context.Context, exported string) error {
	if _, err := st.conn.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY`).ReadAll(); err != nil {
		return err
	}
	if exported != "" {
		if _, err := st.conn.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+exported+`'`).ReadAll(); err != nil {
			return fmt.Errorf("import the slot's snapshot: %w", err)
		}
	}
	return nil
}

// membersInSnapshot is the set of tables (schema.name) in publication as
// the transaction's snapshot sees it: pg_publication, pg_publication_rel
// and pg_publication_namespace read as tables, in the snapshot. It may
// list tables the publication does not publish (a FOR ALL TABLES one
// lists every table): it is asked only about tables that are published.
func membersInSnapshot(ctx context.Context, conn *pgconn.PgConn, publication string) (map[string]bool, error) {
	res := conn.ExecParams(ctx, `SELECT n.nspname::text || '.' || c.relname::text
		FROM pg_publication p, pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE p.pubname = $1 AND c.relkind IN ('r', 'p') AND (p.puballtables
			OR EXISTS (SELECT 1 FROM pg_publication_rel r WHERE r.prpubid = p.oid AND r.prrelid = c.oid)
			OR EXISTS (SELECT 1 FROM pg_publication_namespace s WHERE s.pnpubid = p.oid AND s.pnnspid = c.relnamespace))`,
		[][]byte{[]byte(publication)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	m := make(map[string]bool, len(res.Rows))
	for _, row := range res.Rows {
		m[string(row[0])] = true
	}
	return m, nil
}

// resume orders the tables as the last run read them and skips what it
// committed: the tables before the mark's, and in the mark's table the
// rows up to its key. A table the last run did not list (it joined the
// publication since) is read after the ones it did, in name order.
func (st *snapshotState) resume(from snapMark) {
	if from.Tables != nil {
		byName := make(map[string]snapTable, len(st.tables))
		for _, t := range st.tables {
			byName[t.qualified()] = t
		}
		read := 0 // how many of from.Tables the last run read to the end
		if from.Table != "" {
			read = max(slices.Index(from.Tables, from.Schema+"."+from.Table), 0)
		}
		var ordered []snapTable
		for i, q := range from.Tables {
			if t, ok := byName[q]; ok {
				delete(byName, q)
				ordered = append(ordered, t)
				if i < read {
					st.ti++
				}
			}
		}
		for _, t := range st.tables { // joined since, in name order
			if _, ok := byName[t.qualified()]; ok {
				ordered = append(ordered, t)
			}
		}
		st.tables = ordered
	} else {
		// A mark from before marks listed their tables: name order.
		for st.ti < len(st.tables) && from.Table != "" && st.tables[st.ti].before(from.Schema, from.Table) {
			st.ti++
		}
	}
	if st.ti < len(st.tables) && from.Table != "" && st.tables[st.ti].schema == from.Schema && st.tables[st.ti].name == from.Table {
		st.after = from.Key
	}
	st.names = make([]string, len(st.tables))
	for i, t := range st.tables {
		st.names[i] = t.qualified()
	}
}

// joinedSince lists the tables of publication not among those the
// snapshot read (they joined it while the snapshot was read) and, when
// there are any, moves the snapshot to a new transaction, taken after
// they joined, to read them in: their rows from before they joined are
// in no change the stream brings.
func (st *snapshotState) joinedSince(ctx context.Context, publication string) ([]snapTable, error) {
	now, err := publishedTables(ctx, st.conn, publication)
	if err != nil {
		return nil, err
	}
	var added []snapTable
	for _, t := range now {
		if !slices.Contains(st.names, t.qualified()) {
			added = append(added, t)
		}
	}
	if len(added) == 0 {
		return nil, nil
	}
	if _, err := st.conn.Exec(ctx, `COMMIT`).ReadAll(); err != nil {
		return nil, err
	}
	if err := st.beginTx(ctx, ""); err != nil {
		return nil, err
	}
	names := slices.Clip(st.names) // marks handed out keep the list they were made with
	for _, t := range added {
		st.tables = append(st.tables, t)
		names = append(names, t.qualified())
	}
	st.names = names
	return added, nil
}

// publishedTables lists the publication's tables with their primary keys,
// in the order the snapshot reads them. A table without a primary key is
// refused: its rows could be neither paged nor given an identity.
//
// The catalogs are joined by name and oid, never by casting a name to
// regclass: the planner may evaluate such a cast on any pg_class row
// before the publication's filter, and resolving a name in a schema the
// role has no USAGE on (pg_toast) fails for a role that is not a
// superuser ("permission denied for schema pg_toast"). Equality on names
// and oids cannot fail, wherever the planner puts it (and so does
// publishedColumns).
func publishedTables(ctx context.Context, conn *pgconn.PgConn, publication string) ([]snapTable, error) {
	res := conn.ExecParams(ctx, `SELECT p.schemaname::text, p.tablename::text, coalesce(a.attname::text, '')
		FROM pg_publication_tables p
		JOIN pg_namespace n ON n.nspname = p.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
		LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
		WHERE p.pubname = $1
		ORDER BY 1, 2, array_position(i.indkey::int2[], a.attnum)`, [][]byte{[]byte(publication)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, fmt.Errorf("list the tables of publication %s: %w", publication, res.Err)
	}
	byName := map[string]*snapTable{}
	for _, row := range res.Rows {
		schema, name, col := string(row[0]), string(row[1]), string(row[2])
		t := byName[schema+"."+name]
		if t == nil {
			t = &snapTable{schema: schema, name: name}
			byName[schema+"."+name] = t
		}
		if col != "" {
			t.keys = append(t.keys, col)
		}
	}
	var noKey []string
	var tables []snapTable
	for q, t := range byName {
		if len(t.keys) == 0 {
			noKey = append(noKey, q)
			continue
		}
		tables = append(tables, *t)
	}
	if len(noKey) > 0 {
		sort.Strings(noKey)
		return nil, &noKeyError{publication: publication, tables: noKey}
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].before(tables[j].schema, tables[j].name) })
	if err := publishedColumns(ctx, conn, publication, tables); err != nil {
		return nil, err
	}
	return tables, nil
}

// publishedColumns sets each table's cols: the columns the publication
// publishes (pg_publication_tables.attnames: all, or its column list), in
// table order, without generated columns before PostgreSQL 18 (pgoutput
// sends none there, and attnames lists them all the same). A primary key
// column left out of a column list is refused: the snapshot pages and
// names rows by the key.
func publishedColumns(ctx context.Context, conn *pgconn.PgConn, publication string, tables []snapTable) error {
	res := conn.ExecParams(ctx, `SELECT p.schemaname::text || '.' || p.tablename::text, a.attname::text
		FROM pg_publication_tables p
		JOIN pg_namespace n ON n.nspname = p.schemaname
		JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
		JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE p.pubname = $1 AND a.attnum > 0 AND NOT a.attisdropped AND a.attname = ANY(p.attnames)
			AND (a.attgenerated = '' OR current_setting('server_version_num')::int >= 180000)
		ORDER BY 1, a.attnum`, [][]byte{[]byte(publication)}, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("list the published columns of publication %s: %w", publication, res.Err)
	}
	cols := map[string][]string{}
	for _, row := range res.Rows {
		cols[string(row[0])] = append(cols[string(row[0])], string(row[1]))
	}
	for i := range tables {
		t := &tables[i]
		t.cols = cols[t.qualified()]
		for _, k := range t.keys {
			if !slices.Contains(t.cols, k) {
				return fmt.Errorf("publication %s does not publish primary key column %s of %s (its column list leaves it out): snapshot = true pages and names rows by the key", publication, k, t.qualified())
			}
		}
	}
	return nil
}

// page reads the next rows of the snapshot as records numbered from *seq,
// moving to the next table when one is read to its end; none when every
// table is.
func (s *pgCDCSource) snapshotPage(ctx context.Context) ([]runtime.Record, error) {
	st := s.snap
	for st.ti < len(st.tables) {
		t := st.tables[st.ti]
		cols := make([]string, len(t.keys))
		for i, k := range t.keys {
			cols[i] = quoteIdent(k)
		}
		keyList := strings.Join(cols, ", ")
		sel := make([]string, len(t.cols))
		for i, c := range t.cols {
			sel[i] = quoteIdent(c)
		}
		q := `SELECT ` + strings.Join(sel, ", ") + ` FROM ` + t.quoted()
		var params [][]byte
		if st.after != nil {
			if len(st.after) != len(t.keys) {
				return nil, fmt.Errorf("snapshot of %s: the checkpoint's key has %d values, the primary key %d columns", t.qualified(), len(st.after), len(t.keys))
			}
			ph := make([]string, len(t.keys))
			for i := range t.keys {
				ph[i] = "$" + strconv.Itoa(i+1)
				params = append(params, []byte(st.after[i]))
			}
			q += ` WHERE (` + keyList + `) > (` + strings.Join(ph, ", ") + `)`
		}
		q += ` ORDER BY ` + keyList + ` LIMIT ` + strconv.Itoa(snapshotPage)
		res := st.conn.ExecParams(ctx, q, params, nil, nil, nil).Read()
		if res.Err != nil {
			return nil, fmt.Errorf("snapshot of %s: %w", t.qualified(), res.Err)
		}
		if len(res.Rows) == 0 {
			st.ti++
			st.after = nil
			continue
		}
		recs := make([]runtime.Record, 0, len(res.Rows))
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, row := range res.Rows {
			r, key, err := s.snapshotRecord(t, res.FieldDescriptions, row)
			if err != nil {
				return nil, err
			}
			st.marks = append(st.marks, seqMark{seq: r.Seq, mark: snapMark{Schema: t.schema, Table: t.name, Key: key, Tables: st.names}})
			st.after = key
			recs = append(recs, r)
		}
		return recs, nil
	}
	return nil, nil
}

// snapshotRecord turns one row of t into a record: the row as a JSON
// object, meta as a streamed change's (operation "snapshot", lsn one
// below the stream's start) and a message_id that is a UUIDv5 of the slot,
// the table and the key, the same on every read of the row.
func (s *pgCDCSource) snapshotRecord(t snapTable, fields []pgconn.FieldDescription, row [][]byte) (runtime.Record, []string, error) {
	obj := make(map[string]json.RawMessage, len(fields))
	byName := make(map[string]int, len(fields))
	for i, f := range fields {
		byName[f.Name] = i
		if row[i] == nil {
			obj[f.Name] = json.RawMessage("null")
			continue
		}
		obj[f.Name] = pgTextToJSON(f.DataTypeOID, row[i])
	}
	key := make([]string, len(t.keys))
	keyJSON := make([]json.RawMessage, len(t.keys))
	for i, k := range t.keys {
		j, ok := byName[k]
		if !ok || row[j] == nil {
			return runtime.Record{}, nil, fmt.Errorf("snapshot of %s: primary key column %s missing from the row", t.qualified(), k)
		}
		key[i] = string(row[j])
		keyJSON[i] = obj[k]
	}
	payload, err := json.Marshal(obj)
	if err != nil {
		return runtime.Record{}, nil, err
	}
	keyText := key[0]
	if len(key) > 1 {
		b, _ := json.Marshal(keyJSON)
		keyText = string(b)
	}
	r := runtime.Record{Payload: payload, Seq: s.seq}
	s.seq++
	r.Meta = map[string]string{metaPGLSN: s.snap.snapshotRowLSN(), metaPGOperation: opSnapshot, metaPGSchema: t.schema, metaPGTable: t.name, metaPGKey: keyText}
	r.SetMessageID(uuid.NewSHA1(snapshotIDSpace, []byte(s.slot+"\x00"+t.qualified()+"\x00"+keyText)))
	return r, key, nil
}

// nextSnapshot fills pending with the next page of the snapshot; once
// every table is read it ends the snapshot's transaction and starts the
// stream at the slot's start.
func (s *pgCDCSource) nextSnapshot(ctx context.Context) error {
	recs, err := s.snapshotPage(ctx)
	if err != nil {
		if err = lostOn(err, s.snap.conn); healable(err) {
			return s.resumeSnapshot(ctx, err)
		}
		return s.errorf("%v", err)
	}
	if len(recs) > 0 {
		s.pending = recs
		return nil
	}
	st := s.snap
	added, err := st.joinedSince(ctx, s.publication)
	if err != nil {
		if err = lostOn(err, st.conn); healable(err) {
			return s.resumeSnapshot(ctx, err)
		}
		return s.errorf("snapshot: list the tables of publication %s again: %v", s.publication, err)
	}
	if len(added) > 0 {
		names := make([]string, len(added))
		for i, t := range added {
			names[i] = t.qualified()
		}
		s.log.Warn("tables joined the publication while the snapshot was read: reading them too, in a new snapshot taken after they joined", "publication", s.publication, "tables", strings.Join(names, ", "))
		return nil // Next asks again: their rows are next
	}
	s.snapTables = make(map[string]bool, len(st.names))
	for _, q := range st.names {
		s.snapTables[q] = true
	}
	st.conn.Exec(ctx, `COMMIT`).ReadAll()
	st.conn.Close(context.Background())
	s.snapEnd.Store(s.seq)
	s.snapDone.Store(true)
	s.log.Info("snapshot read; streaming", "rows", s.seq, "lsn", st.lsn.String())
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.startStream(sctx)
}

// resumeSnapshot does in the running route what a rerun does when the
// connection the snapshot is read in is lost (lost: a restart or crash of
// the server, a cut connection): the snapshot's transaction, and an
// exported snapshot, ended with it, so the rest is read in a new one. It
// reconnects with the stream's backoff (reconnectFirst doubling up to
// reconnectMax, until the route stops: ctx's error is returned) and opens
// the snapshot again as Open does for a rerun (dial, openSnapshot), from
// the committed mark: what was handed over and not committed is read
// again (under the same message_ids), so nothing rests on records still
// in flight, and the stream later starts at the slot's start as before.
// The replication connection is opened again with it (the slot is
// checked). What a retry cannot heal (the slot or the publication gone,
// authentication refused…) is returned, and stops the route.
func (s *pgCDCSource) resumeSnapshot(ctx context.Context, lost error) error {
	st := s.snap
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	st.conn.Close(cctx)
	cancel()
	st.mu.Lock()
	committed := st.committed
	st.mu.Unlock()
	s.log.Warn("snapshot connection lost; reconnecting to read the rest in a new snapshot", "slot", s.slot,
		"committed_table", committed.Schema+"."+committed.Table, "committed_key", strings.Join(committed.Key, ","), "err", plan.RedactURLs(lost.Error()))
	wait := reconnectFirst
	for attempt := 1; ; attempt++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, reconnectMax)
		st.mu.Lock()
		from := st.committed
		st.mu.Unlock()
		err := s.reopenSnapshot(ctx, from)
		if err == nil {
			s.log.Info("snapshot reconnected", "slot", s.slot, "from_table", from.Schema+"."+from.Table,
				"from_key", strings.Join(from.Key, ","), "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !healable(err) {
			return s.errorf("slot %s: the snapshot's connection was lost and cannot be opened again: %s", s.slot, detail(err))
		}
		if attempt == 1 || attempt%10 == 0 {
			s.log.Warn("reconnecting the snapshot's connection", "slot", s.slot, "attempts", attempt, "err", plan.RedactURLs(err.Error()))
		}
	}
}

// reopenSnapshot is one try of resumeSnapshot: new connections, and the
// snapshot opened again after from, in a new transaction.
func (s *pgCDCSource) reopenSnapshot(ctx context.Context, from snapMark) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if s.conn != nil {
		s.conn.Close(cctx)
		s.conn = nil
	}
	plain, slotExists, err := s.dial(cctx, false)
	if plain != nil {
		defer plain.Close(context.Background())
	}
	if err != nil {
		return err
	}
	return s.openSnapshot(cctx, plain, slotExists, from, s.snap.lsn)
}

// adopt takes over the reading state of next, the snapshot opened again
// after the connection was lost (resumeSnapshot). The marks of the rows
// handed out before are dropped: until a row read again is committed, the
// checkpoint stays at the mark the reading resumed from.
func (st *snapshotState) adopt(next *snapshotState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.conn, st.tables, st.names, st.ti, st.after = next.conn, next.tables, next.names, next.ti, next.after
	st.from, st.committed, st.marks = next.from, next.from, nil
}

// snapshotPosition is the checkpoint while the snapshot is not committed
// to its end: the mark of the last committed row (or where this run
// started), with the stream's start in Offset.
func (s *pgCDCSource) snapshotPosition(c runtime.AckPos, ok bool) checkpoint.Position {
	st := s.snap
	st.mu.Lock()
	mark := st.from
	if ok && c.Next > 0 {
		last := c.Next - 1
		i := sort.Search(len(st.marks), func(i int) bool { return st.marks[i].seq >= last })
		if i < len(st.marks) && st.marks[i].seq == last {
			mark = st.marks[i].mark
			st.marks = st.marks[i:]
		}
	}
	st.committed = mark
	st.mu.Unlock()
	b, _ := json.Marshal(mark)
	return checkpoint.Position{Source: s.checkpointSource(), Mode: modeSnapshot + string(b), Offset: int64(st.lsn)}
}

// PremiseNode is the plan node the source was built from.
func (s *pgCDCSource) PremiseNode() string { return s.node }

// CheckPremise checks the primary_key premise before the first record:
// every table of the publication has a primary key. (Open checks it
// again, in the snapshot it reads.)
func (s *pgCDCSource) CheckPremise(ctx context.Context, p plan.Premise) error {
	if p.Kind != plan.PremisePrimaryKey {
		return fmt.Errorf("postgres_cdc cannot check a %s premise", p.Kind)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(cctx, s.rawURL)
	if err != nil {
		return s.errorf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	_, err = publishedTables(cctx, conn, s.publication)
	var nk *noKeyError
	if errors.As(err, &nk) {
		return &runtime.PremiseFailure{Found: nk.Error(), Fix: "ALTER TABLE " + nk.tables[0] + " ADD PRIMARY KEY (…), or leave the table out of publication " + s.publication}
	}
	return err
}

// noKeyError names the published tables without a primary key.
type noKeyError struct {
	publication string
	tables      []string
}

func (e *noKeyError) Error() string {
	return fmt.Sprintf("snapshot = true reads every table of publication %s in primary key order and gives each row an id from its key, but %s has no primary key: add one (ALTER TABLE … ADD PRIMARY KEY) or leave the table out of the publication",
		e.publication, strings.Join(e.tables, ", "))
}

// parseSnapshotMode reads the mark of a snapshot checkpoint.
func parseSnapshotMode(mode string) (snapMark, error) {
	var m snapMark
	if err := json.Unmarshal([]byte(strings.TrimPrefix(mode, modeSnapshot)), &m); err != nil {
		return m, fmt.Errorf("checkpoint mode %q: %w", mode, err)
	}
	return m, nil
}
