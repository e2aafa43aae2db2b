package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqb-dev/mqb/runtime/dedup"
)

// keysSink is a sink that records the dedup keys of what it was given.
type keysSink struct {
	wrote []string
	err   error
}

func (s *keysSink) Write(_ context.Context, recs []*Record) error {
	if s.err != nil {
		return s.err
	}
	for _, r := range recs {
		s.wrote = append(s.wrote, r.payload().(map[string]any)["id"].(string))
	}
	return nil
}

func (s *keysSink) Close() error { return nil }

// dedupFilterRoute is a route's dedup { key = payload.id } then
// filter payload.qty != 3 over the dedup store in dir, writing to sink.
func dedupFilterRoute(t *testing.T, dir string, sink Sink) (*route, *dedup.Store) {
	t.Helper()
	st, err := dedup.OpenNamespace(dir, "route/r")
	if err != nil {
		t.Fatal(err)
	}
	key, err := compileProgram("payload.id", nil)
	if err != nil {
		t.Fatal(err)
	}
	keep, err := compileProgram("payload.qty != 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	turn := newTurnGate()
	rt := &route{
		name: "r", now: time.Now, acks: newPartitionAcks(false),
		steps: []step{
			&dedupStep{key: key, store: st, ttl: time.Hour, now: time.Now, turn: turn},
			&filterStep{prog: keep},
		},
		turns:       []*turnGate{turn},
		dedupStores: []dedupStore{st},
		sink:        sink,
		retry:       retryPolicy{attempts: 1},
		metrics:     m.forRoute("r"),
	}
	return rt, st
}

// readBatch is a read batch of records {id, qty} at positions from 0,
// tracked as a source's reader tracks it.
func readBatch(t *testing.T, rt *route, seq uint64, recs ...map[string]any) *batch {
	t.Helper()
	b := &batch{seq: seq}
	for i, v := range recs {
		b.recs = append(b.recs, Record{Seq: uint64(i), Next: int64(i + 1), value: v})
	}
	if err := rt.acks.track(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// committable is the position a commit now would save (0: none yet).
func committable(rt *route) uint64 {
	_, all := rt.acks.advance()
	return all[0].Next
}

// forgets reports whether a new process opening dir would take key as new.
func forgets(t *testing.T, dir, key string) bool {
	t.Helper()
	st, err := dedup.OpenNamespace(dir, "route/r")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := []dedup.Verdict{0}
	if err := st.Reserve([]string{key}, time.Now(), v); err != nil {
		t.Fatal(err)
	}
	return v[0] == dedup.New
}

// A record the filter behind a dedup step drops holds the key it reserved
// until the batch is delivered and the key promoted; the commit must not
// pass it before. Seed-17352: the filtered record led its batch and was
// acked straight away; a commit saved the position past it while its key
// was only reserved in memory, a kill lost the key, and the next run let
// a later repeat of the key through.
func TestFilteredRecordHoldsPositionUntilKeyPromoted(t *testing.T) {
	dir := t.TempDir()
	sink := &keysSink{}
	rt, st := dedupFilterRoute(t, dir, sink)
	b := readBatch(t, rt, 0,
		map[string]any{"id": "k-299", "qty": 3}, // filtered; its key is new
		map[string]any{"id": "k-1", "qty": 4})
	w := &worker{}
	if err := rt.process(w, b); err != nil {
		t.Fatal(err)
	}
	rt.passTurns(b)
	if b.recs[0].state != stFiltered {
		t.Fatalf("record 0 is %v, want filtered", b.recs[0].state)
	}
	// A commit now (a kill right after it, before the sink wrote) must
	// leave record 0 to the next run: its key is not promoted yet.
	if next := committable(rt); next > 0 {
		t.Errorf("after the steps a commit saves next %d, past the filtered record 0 whose key is only reserved", next)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if !forgets(t, dir, "k-299") {
		t.Fatal("k-299 already remembered on disk: the test no longer shows the window")
	}

	// Delivered, the key is promoted before the batch is acked: the commit
	// passes both records and the key is remembered.
	rt, st = dedupFilterRoute(t, dir, sink)
	defer st.Close()
	b = readBatch(t, rt, 0,
		map[string]any{"id": "k-299", "qty": 3},
		map[string]any{"id": "k-1", "qty": 4})
	if err := rt.process(w, b); err != nil {
		t.Fatal(err)
	}
	rt.passTurns(b)
	if err := rt.deliver(w, []*batch{b}); err != nil {
		t.Fatal(err)
	}
	if next := committable(rt); next != 2 {
		t.Errorf("after delivery a commit saves next %d, want 2", next)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if forgets(t, dir, "k-299") {
		t.Error("k-299 forgotten after its batch was delivered")
	}
	if len(sink.wrote) != 1 || sink.wrote[0] != "k-1" {
		t.Errorf("sink wrote %v, want [k-1]", sink.wrote)
	}
}

// A batch that fails at the sink gives its keys back (releaseAll) and
// must not have let the commit pass a record holding one: the failed
// route's last commit would save a position the next run resumes after,
// with the key of a filtered record forgotten.
func TestFailedBatchCommitsNoFilteredKeyHolder(t *testing.T) {
	dir := t.TempDir()
	rt, st := dedupFilterRoute(t, dir, &keysSink{err: errors.New("sink down")})
	defer st.Close()
	b := readBatch(t, rt, 0,
		map[string]any{"id": "k-299", "qty": 3},
		map[string]any{"id": "k-1", "qty": 4})
	w := &worker{}
	if err := rt.process(w, b); err != nil {
		t.Fatal(err)
	}
	rt.passTurns(b)
	if err := rt.deliver(w, []*batch{b}); err == nil {
		t.Fatal("deliver to a failing sink succeeded")
	}
	rt.releaseAll([]*batch{b})
	if next := committable(rt); next > 0 {
		t.Errorf("after the failed batch a commit saves next %d, past the filtered record 0 whose key was given back", next)
	}
}
