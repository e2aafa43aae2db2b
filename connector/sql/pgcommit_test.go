package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// pgCount is the number of rows of table orders, read on a connection of
// its own: committed rows only.
func pgCount(t *testing.T, url string) int {
	t.Helper()
	return pgQuery(t, url, `SELECT count(*) FROM orders`, func(t *testing.T, rows sqlRows) (n int) {
		for rows.Next() {
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
		return n
	})
}

func copyRecs(prefix string, n int) []*runtime.Record {
	recs := make([]*runtime.Record, n)
	for i := range recs {
		recs[i] = valueRecord(fmt.Sprintf("%s%d", prefix, i), map[string]any{"amount": int64(i), "body": "b"})
	}
	return recs
}

// A bulk_copy sink told to sync on commit writes into a transaction it
// keeps open: rows are visible once Sync commits. A refused row commits
// what the transaction held and dead-letters just that row. Losing the
// open transaction (the server restarts) fails the write for good,
// without a retry, and every later Write and Sync with it.
func TestPostgresBulkCopyCommitOnSync(t *testing.T) {
	srv, url, s, cs := newCommitOnSyncSink(t)
	ctx := context.Background()

	if err := s.Write(ctx, copyRecs("a", 1000)); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, copyRecs("b", 1000)); err != nil {
		t.Fatal(err)
	}
	if n := pgCount(t, url); n != 0 {
		t.Errorf("%d rows visible before Sync, want 0", n)
	}
	if err := cs.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := pgCount(t, url); n != 2000 {
		t.Errorf("%d rows after Sync, want 2000", n)
	}

	// A refused row: the open transaction's rows are committed, the
	// batch goes row by row, the bad row alone refused.
	if err := s.Write(ctx, copyRecs("c", 100)); err != nil {
		t.Fatal(err)
	}
	bad := copyRecs("d", 3)
	bad[1].SetPayload(nil, map[string]any{"amount": nil, "body": "null amount"})
	if err := s.Write(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if bad[0].Refused() != "" || bad[1].Refused() == "" || bad[2].Refused() != "" {
		t.Errorf("refused %q %q %q: want only the second", bad[0].Refused(), bad[1].Refused(), bad[2].Refused())
	}
	if n := pgCount(t, url); n != 2102 {
		t.Errorf("%d rows after the refused row, want 2102", n)
	}
	if err := cs.Sync(); err != nil {
		t.Fatal(err)
	}

	// Rows in the open transaction, then the server restarts.
	if err := s.Write(ctx, copyRecs("e", 500)); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t, 100*time.Millisecond)
	err := s.Write(ctx, copyRecs("f", 10))
	if err == nil || runtime.IsRetryable(err) || !strings.Contains(err.Error(), "transaction") || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("write after the open transaction was lost: err %v (retryable %v), want a non-retryable error saying the transaction is lost", err, runtime.IsRetryable(err))
	}
	if err := cs.Sync(); err == nil {
		t.Error("Sync after the open transaction was lost: no error")
	}
	if err := s.Write(ctx, copyRecs("g", 10)); err == nil || runtime.IsRetryable(err) {
		t.Errorf("a later write: err %v, want the loss again", err)
	}
	if n := pgCount(t, url); n != 2102 {
		t.Errorf("%d rows after the loss, want the 2102 committed", n)
	}

	// Nothing was committed by a sink that lost nothing: a fresh sink
	// whose first write meets a restarted server retries it.
	s2, err := newServerSinkForTest(t, map[string]plan.Value{
		"url": strV(url), "bulk_copy": {Type: plan.TBool, Bool: true},
		"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
			ex("payload.amount"), lit(", "), ex("payload.body"), lit(")"))})
	if err != nil {
		t.Fatal(err)
	}
	cs2 := s2.(runtime.CommitSyncSink)
	cs2.SyncOnCommit()
	if err := s2.Write(ctx, copyRecs("h", 10)); err != nil {
		t.Fatal(err)
	}
	if err := cs2.Sync(); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t, 100*time.Millisecond)
	if err := s2.Write(ctx, copyRecs("i", 10)); err == nil || !runtime.IsRetryable(err) {
		t.Errorf("write on a committed transaction's lost connection: err %v, want retryable", err)
	}
	if err := s2.Write(ctx, copyRecs("i", 10)); err != nil {
		t.Errorf("the retry: %v", err)
	}
	if err := cs2.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := pgCount(t, url); n != 2122 {
		t.Errorf("%d rows, want 2122", n)
	}
}

// Sync waits for a write under way on the open transaction; when that
// write loses the transaction (the server restarts under it), the rows of
// the writes before it, acked, are gone too, and Sync must say so rather
// than find nothing left to commit.
func TestPostgresBulkCopySyncDuringLostWrite(t *testing.T) {
	srv, url, s, cs := newCommitOnSyncSink(t)
	ctx := context.Background()
	if err := s.Write(ctx, copyRecs("a", 100)); err != nil { // acked, in the open transaction
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- s.Write(ctx, copyRecs("big", 1000000)) }()
	// The big COPY is under way once its query (behind the statements
	// that set its savepoint) is active.
	copying := func() bool {
		return pgQuery(t, url, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%COPY%' AND state = 'active' AND pid <> pg_backend_pid()`,
			func(t *testing.T, rows sqlRows) (n int) {
				for rows.Next() {
					rows.Scan(&n)
				}
				return n
			}) > 0
	}
	if !waitFor(copying, time.Minute, 5*time.Millisecond) {
		t.Fatal("the big write never started its COPY")
	}
	synced := make(chan error, 1)
	go func() { synced <- cs.Sync() }()
	time.Sleep(100 * time.Millisecond) // Sync waits for the write
	select {
	case err := <-wrote:
		t.Fatalf("the big write ended before the restart (err %v): make it bigger", err)
	default:
	}
	srv.Restart(t, 100*time.Millisecond)
	if err := <-wrote; err == nil || runtime.IsRetryable(err) {
		t.Errorf("write under the restart: err %v, want the loss, not retryable", err)
	}
	if err := <-synced; err == nil {
		t.Error("Sync waiting on the write that lost the transaction returned nil: the position would pass the 100 acked rows")
	}
	if n := pgCount(t, url); n != 0 {
		t.Errorf("%d rows committed, want 0", n)
	}
}

// newCommitOnSyncSink is a bulk_copy sink into orders of a new database
// on a PostgreSQL of the test's own, told to sync on commit.
func newCommitOnSyncSink(t *testing.T) (*testsrv.PGServer, string, runtime.Sink, runtime.CommitSyncSink) {
	t.Helper()
	srv := testsrv.NewPostgres(t)
	url := srv.NewDatabase(t).URL
	s, err := newServerSinkForTest(t, map[string]plan.Value{
		"url": strV(url), "create_table": strV(pgOrdersDDL), "bulk_copy": {Type: plan.TBool, Bool: true},
		"insert_query": tmplV(lit("INSERT INTO orders (id, amount, body) VALUES ("), ex(`meta["mqb.id"]`), lit(", "),
			ex("payload.amount"), lit(", "), ex("payload.body"), lit(")"))})
	if err != nil {
		t.Fatal(err)
	}
	cs := s.(runtime.CommitSyncSink)
	cs.SyncOnCommit()
	return srv, url, s, cs
}

// TestPostgresSinkReleasesRecords: the PostgreSQL sink says it keeps no
// record past Write (runtime.ReleasingSink), so the route reuses its
// batches; records changed after Write returned, as a reused batch's are,
// change nothing the commit (Sync) then makes durable.
func TestPostgresSinkReleasesRecords(t *testing.T) {
	_, url, s, cs := newCommitOnSyncSink(t)
	if rs, ok := s.(runtime.ReleasingSink); !ok || !rs.ReleasesRecords() {
		t.Fatal("the PostgreSQL sink does not say it releases records")
	}
	ctx := context.Background()
	recs := copyRecs("a", 500)
	if err := s.Write(ctx, recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.SetPayload(nil, map[string]any{"amount": int64(-1), "body": "reused"})
	}
	if err := cs.Sync(); err != nil {
		t.Fatal(err)
	}
	got := pgQuery(t, url, `SELECT count(*), sum(amount), count(*) FILTER (WHERE body <> 'b') FROM orders`, func(t *testing.T, rows sqlRows) (v [3]int64) {
		for rows.Next() {
			if err := rows.Scan(&v[0], &v[1], &v[2]); err != nil {
				t.Fatal(err)
			}
		}
		return v
	})
	if want := [3]int64{500, 499 * 500 / 2, 0}; got != want {
		t.Errorf("rows, sum of amounts, changed bodies = %v, want %v", got, want)
	}
}
