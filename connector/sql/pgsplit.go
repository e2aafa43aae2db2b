package sql

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mqb-dev/mqb/internal/lazyre"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// Split writes: most of a keyed upsert's server time is the conflict
// clause itself (a speculative insert a row, each a statement's row),
// where COPY inserts the same rows into the same keyed table in about
// half the time (heap pages filled many rows a WAL record; measured in
// psql on a million rows: 4.3–4.6 s against 9.4–10.9 s for the staged
// upsert of the same rows). So a staged upsert whose rows are bare
// columns,
//
//	INSERT INTO t (id, amount) VALUES (${…}, ${…}) ON CONFLICT (id) …
//
// writes a batch in three parts, in one transaction, each in read order:
//
//  1. the rows whose key this sink may have written before (a Bloom
//     filter of the keys of the batches it committed), through the
//     staged statement, conflict clause and all;
//  2. the first row of every other key, by COPY into t;
//  3. the rows repeating a key of part 2, through the staged statement.
//
// They are sent in two round trips: BEGIN and the COPY of part 2 in one
// query, then parts 1 and 3, the outbox position and COMMIT in one
// pipeline. Part 1 runs after part 2 although its rows may come first in
// read order: the two parts share no key, so a conflict between them can
// only be on another unique index, which fails the statement (and the
// split write) under a conflict target, and which ON CONFLICT DO NOTHING
// without a target would absorb in whichever row came second: such a
// table (a unique or exclusion index besides the primary key) gets no
// split writes. The parts share no key only where a key is its text (in
// an integer column 5 and 05 are one key, which would go by part 1 and
// part 2, and part 2's row would take it first): a text or varchar
// column under a deterministic collation, or an integer or uuid column
// whose texts are in the form the server prints them (an allow-list,
// pgexactkey.go). A streamed write that meets a key in another form
// stops its COPY and the staged statement writes the batch; elsewhere
// part 1 goes first, in a round trip of its own, its rows placed before
// COPY starts, so COPY fails on such a row as on any conflict.
//
// The filter only chooses the way a row goes; the table's unique index
// decides. COPY fails on any row that would have met a conflict (a key
// already in the table that the filter did not know, two spellings of
// one key), and then the transaction is rolled back and the batch is
// written by the staged statement as before. When COPY goes through,
// every key of part 2 was absent from the table and once in it: each
// first row is inserted as the upsert would have inserted it, and part 3
// meets it as the upsert's later rows would. The rows of a key whose
// first row went by part 1 all go by part 1, in read order. So the table
// ends as the upsert alone would leave it, and a batch is still written
// or not as a whole, with its outbox position, before Write returns.
//
// Only what COPY does as the statement would qualifies (an allow-list,
// read from the catalog when the sink opens): an ordinary table without
// rules (COPY ignores them), row-level security (COPY refuses it), any
// trigger but PostgreSQL's internal ones (a statement trigger on UPDATE
// fires for ON CONFLICT DO UPDATE, not for COPY), identity columns or
// sequence defaults (parts 1 and 3 run beside part 2, so a serial column
// would not number the rows in read order). A conflict target of plain
// columns, each bound to a parameter, names the key (the primary key
// does for ON CONFLICT DO NOTHING, which absorbs a conflict on any unique
// index: one on another index fails COPY); a statement with no conflict
// clause copies every row. After a failed COPY the sink waits
// 1, 2, 4 … up to 64 batches before it tries again, so a route replaying
// rows it wrote before its restart pays for one refused COPY, not one a
// batch.

// pgSplit is a sink's split-write state; nil: the statement does not
// qualify.
type pgSplit struct {
	table   string // t, as insert_query names it
	copySQL string // COPY t (cols) FROM STDIN
	keys    []int  // the parameters bound into the conflict target; nil: none

	// byPrimaryKey: ON CONFLICT DO NOTHING, keyed by the primary key's
	// parameters, which splitReady finds in query.
	byPrimaryKey bool
	query        []plan.Part
	columns      []string // the columns COPY fills, as insert_query names them

	// exact: the key's columns hold a value equal to another only when
	// their texts are the same, where each is in its form (forms, one a
	// key parameter; pgexactkey.go); then part 1 may run after part 2
	// (see above).
	exact bool
	forms []keyForm
	// doNothing: the conflict clause is DO NOTHING; aside: part 1 may
	// run beside the COPY on a connection of its own (pgaside.go).
	doNothing, aside bool

	mu      sync.Mutex   // guards what follows
	written *keyFilter   // hashes of the keys this sink wrote, or tried to
	seed    maphash.Seed // of those hashes
	skip    int          // batches to write without trying
	wait    int          // the skip after the next failure is twice this

	copied atomic.Int64 // batches written by split writes
	asides atomic.Int64 // of which part 1 ran beside the COPY (pgaside.go)
	missed atomic.Int64 // split writes COPY refused, written again staged
}

// splitFilterKeys is how many keys the filter holds before it is emptied
// and filled again: 2.5 MiB of bits (keyfilter.go).
const splitFilterKeys = 1 << 21

// splitMaxWait is the most batches written without a try after failures.
const splitMaxWait = 64

// splitTarget reads a staged insert_query (parts) as a split write's
// table and columns: nil when its VALUES row is not the parameters in
// order, one per column, or its conflict clause names no plain key.
func splitTarget(parts []plan.Part) *pgSplit {
	sql, n, ok := markedSQL(parts)
	if !ok {
		return nil
	}
	_, open, closing, ok := valuesRow(sql)
	if !ok {
		return nil
	}
	m := copyTargetRE().FindStringSubmatch(sql[:closing+1])
	if m == nil || len(strings.Split(m[2], ",")) != n {
		return nil
	}
	for i, v := range strings.Split(sql[open+1:closing], ",") {
		if strings.TrimSpace(v) != stageMark(i+1) {
			return nil
		}
	}
	sp := &pgSplit{table: m[1], copySQL: "COPY " + m[1] + " (" + strings.TrimSpace(m[2]) + ") FROM STDIN"}
	for _, c := range strings.Split(m[2], ",") {
		sp.columns = append(sp.columns, strings.TrimSpace(c))
	}
	switch tail := strings.TrimSpace(sql[closing+1:]); {
	case tail == "":
	case doNothingRE().MatchString(tail):
		sp.query, sp.byPrimaryKey, sp.doNothing = parts, true, true // splitReady reads the key
	default:
		if sp.keys = lockOrderOf(parts, pgConflictTarget(parts), foldPostgres); sp.keys == nil {
			return nil
		}
		sp.doNothing = endsDoNothingRE().MatchString(tail)
	}
	return sp
}

// doNothingRE matches a conflict clause without a target: any unique
// index's conflict is absorbed. The split write tells keys apart by the
// primary key's columns then; a conflict on another index fails its
// COPY as any conflict does.
var doNothingRE = lazyre.New(`(?is)^ON\s+CONFLICT\s+DO\s+NOTHING$`)

// endsDoNothingRE matches a conflict clause whose action is DO NOTHING.
var endsDoNothingRE = lazyre.New(`(?is)\bDO\s+NOTHING$`)

// primaryKeyPG lists the columns of the primary key of the table named
// $1, quoted as needed, in the key's order.
const primaryKeyPG = `SELECT quote_ident(a.attname) FROM pg_index i
 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
 WHERE i.indrelid = to_regclass($1) AND i.indisprimary
 ORDER BY array_position(i.indkey::int2[], a.attnum)`

// uniquePG counts the unique and exclusion indexes of the table named $1.
// Where the key is the primary key of ON CONFLICT DO NOTHING without a
// target, it must be the only one: that clause absorbs a conflict on any
// of them, in whichever row comes second, and a split write runs part 1
// after part 2 (see above). Part 1 beside the COPY needs the same of any
// key (pgaside.go).
const uniquePG = `SELECT count(*) FROM pg_index
 WHERE indrelid = to_regclass($1) AND (indisunique OR indisexclusion)`

// splitQualifies reads from the catalog whether table is one COPY writes
// as the statement would (see above).
const splitQualifies = `SELECT c.relkind = 'r' AND NOT c.relrowsecurity
 AND NOT EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = c.oid)
 AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal)
 AND NOT EXISTS (SELECT 1 FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) ILIKE '%nextval(%'))
 FROM pg_class c WHERE c.oid = to_regclass($1)`

// splitReady checks the table behind sp on c: false when it does not
// qualify, or cannot be read.
func splitReady(ctx context.Context, c *pgconn.PgConn, sp *pgSplit) bool {
	res := c.ExecParams(ctx, splitQualifies, [][]byte{[]byte(sp.table)}, nil, nil, nil).Read()
	err := res.Err
	if err != nil || len(res.Rows) != 1 || string(res.Rows[0][0]) != "t" {
		return false
	}
	if sp.byPrimaryKey {
		res := c.ExecParams(ctx, primaryKeyPG, [][]byte{[]byte(sp.table)}, nil, nil, nil).Read()
		if res.Err != nil || len(res.Rows) == 0 {
			return false
		}
		var cols []string
		for _, row := range res.Rows {
			cols = append(cols, string(row[0]))
		}
		if sp.keys = lockOrderOf(sp.query, cols, foldPostgres); sp.keys == nil {
			return false
		}
		if !onlyUnique(ctx, c, sp.table) {
			return false
		}
	}
	sp.forms, sp.exact = exactKeyReady(ctx, c, sp)
	sp.aside = sp.exact && sp.doNothing && len(sp.keys) > 0 && (sp.byPrimaryKey || onlyUnique(ctx, c, sp.table))
	sp.written = newKeyFilter(splitFilterKeys)
	sp.seed = maphash.MakeSeed()
	return true
}

// onlyUnique reads uniquePG: whether the table has one unique or
// exclusion index, no more (false when it cannot tell).
func onlyUnique(ctx context.Context, c *pgconn.PgConn, table string) bool {
	res := c.ExecParams(ctx, uniquePG, [][]byte{[]byte(table)}, nil, nil, nil).Read()
	return res.Err == nil && len(res.Rows) == 1 && string(res.Rows[0][0]) == "1"
}

// due reports whether the next batch tries a split write.
func (sp *pgSplit) due() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.skip > 0 {
		sp.skip--
		return false
	}
	return true
}

// failed puts the next try off.
func (sp *pgSplit) failed() {
	sp.missed.Add(1)
	sp.mu.Lock()
	sp.wait = min(max(2*sp.wait, 1), splitMaxWait)
	sp.skip = sp.wait
	sp.mu.Unlock()
}

// succeeded counts a split write and lets the next batch try at once.
func (sp *pgSplit) succeeded() {
	sp.copied.Add(1)
	sp.mu.Lock()
	sp.wait = 0
	sp.mu.Unlock()
}

// key appends row's key to dst: each key value's length, then its bytes
// (a NULL is length 0 with a marker byte of its own).
func (sp *pgSplit) key(dst []byte, row [][]byte) []byte {
	for _, j := range sp.keys {
		v := row[j]
		if v == nil {
			dst = append(dst, 0xff)
			continue
		}
		dst = binary.AppendUvarint(append(dst, 0), uint64(len(v)))
		dst = append(dst, v...)
	}
	return dst
}

// remember adds the keys of the rows live[...], which the staged
// statement wrote, to the filter.
func (sp *pgSplit) remember(rows [][][]byte, live []int) {
	if sp == nil || sp.keys == nil {
		return
	}
	var k []byte
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, i := range live {
		k = sp.key(k[:0], rows[i])
		sp.written.testAndAdd(maphash.Bytes(sp.seed, k))
	}
}

// parts splits live (in the order they are written) into the three
// parts of a split write, sc.before, sc.copied and sc.after, and adds
// the keys it sends by COPY to the filter (a key the batch then fails to
// write only sends its rows by part 1 next time, which writes them all
// the same).
func (sp *pgSplit) parts(sc *pgScratch, rows [][][]byte, live []int) {
	sp.startParts(sc)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, i := range live {
		sp.place(sc, rows, i)
	}
}

// startParts empties sc's parts for a write.
func (sp *pgSplit) startParts(sc *pgScratch) {
	sc.before, sc.copied, sc.after = sc.before[:0], sc.copied[:0], sc.after[:0]
	sc.inexact = false
	if sc.first == nil {
		sc.first = map[uint64]bool{}
	}
	clear(sc.first)
}

// place adds row i to its part, the rows before it placed: part 2 for
// the first row of a key the filter does not hold, part 3 for the rows
// after it, part 1 for every row of any other key. The write's own keys
// are told apart by a 64-bit hash: two keys with one hash only send the
// second one's rows by part 1 or 3. It reports whether the row goes by
// COPY. sp.mu is held.
func (sp *pgSplit) place(sc *pgScratch, rows [][][]byte, i int) bool {
	if sp.keys == nil {
		sc.copied = append(sc.copied, i)
		return true
	}
	if !sp.canonical(rows[i]) {
		sc.inexact = true
	}
	sc.key = sp.key(sc.key[:0], rows[i])
	h := maphash.Bytes(sp.seed, sc.key)
	if byCopy, seen := sc.first[h]; seen {
		if byCopy {
			sc.after = append(sc.after, i)
		} else {
			sc.before = append(sc.before, i)
		}
		return false
	}
	byCopy := !sp.written.testAndAdd(h)
	sc.first[h] = byCopy
	if byCopy {
		sc.copied = append(sc.copied, i)
	} else {
		sc.before = append(sc.before, i)
	}
	return byCopy
}

// splitPG writes the live rows as a split write. done is false when it
// did not (nothing to copy, or COPY refused a row): nothing of the batch
// is written then, and the staged statement writes it. An error is the
// connection's: the batch is written again.
func (s *sqlServerSink) splitPG(ctx context.Context, c *pgConn, sc *pgScratch, recs []*runtime.Record, rows [][][]byte, live []int) (absorbed int64, done bool, err error) {
	sp := s.split
	live = s.order.sortText(rows, live) // at concurrency above 1 (lockorder.go)
	sp.parts(sc, rows, live)
	if len(sc.copied) == 0 {
		return 0, false, nil
	}
	if err := s.stageReady(ctx, c); err != nil {
		return 0, false, nil // the staged write says what it means
	}
	absorbed, err = s.splitTx(ctx, c, sc, recs, sc.copyOf(rows, sc.copied))
	if err != nil {
		return 0, false, s.splitFailed(ctx, c, err)
	}
	sp.succeeded()
	return absorbed, true, nil
}

// splitFailed rolls a split write that failed with err back. A row the
// server refused puts the next try off and returns nil: the staged
// statement writes the batch. Any other error is the connection's.
func (s *sqlServerSink) splitFailed(ctx context.Context, c *pgConn, err error) error {
	if c.conn.TxStatus() != 'I' && !c.conn.IsClosed() {
		if _, rerr := c.conn.Exec(ctx, "ROLLBACK").ReadAll(); rerr != nil {
			return rerr
		}
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	s.split.failed()
	return nil
}

// splitTx runs a split write's transaction, its rows placed in sc's
// parts as COPY reads data (in full beforehand, or as it reads:
// pgstream.go): BEGIN and the COPY of part 2 in one query, then parts 1
// and 3, the outbox position and COMMIT in one pipeline. Where the key
// is not exact (or a key of the batch is not in its form), part 1 goes
// first (placed beforehand), in a pipeline of its own with BEGIN. Any
// error leaves the transaction for the caller to roll back.
func (s *sqlServerSink) splitTx(ctx context.Context, c *pgConn, sc *pgScratch, recs []*runtime.Record, data io.Reader) (absorbed int64, err error) {
	begin := "BEGIN; "
	if sc.aside != nil {
		begin += asideLockLimit // pgaside.go
	}
	if !s.split.exact || sc.inexact {
		if absorbed, err = s.stagedPipeline(ctx, c, recs, sc.rows, sc.before, true, false); err != nil {
			return 0, err
		}
		sc.before, begin = sc.before[:0], ""
	}
	_, err = c.conn.CopyFrom(ctx, data, begin+s.split.copySQL)
	if a := sc.aside; a != nil { // part 1 beside the COPY (pgaside.go)
		sc.aside = nil
		keep := err == nil && len(sc.live) > 0
		n, ran, aerr := a.finish(sc, keep)
		if ran && keep {
			if err = aerr; err == nil {
				s.split.asides.Add(1)
			}
			absorbed, sc.before = absorbed+n, sc.before[:0]
		}
	}
	if err != nil {
		return 0, err
	}
	if len(sc.live) == 0 {
		return 0, errNoRows
	}
	sc.before = append(sc.before, sc.after...)
	n, err := s.stagedPipeline(ctx, c, recs, sc.rows, sc.before, false, true)
	return absorbed + n, err
}
