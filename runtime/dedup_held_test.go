package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/testsrv"
	"github.com/mqb-dev/mqb/runtime/dedup"
)

// heldKeyStep is a dedup step over a PostgreSQL store shared with another
// instance, holder, which has reserved key "k".
func heldKeyStep(t *testing.T) (*dedupStep, *dedup.SQLStore) {
	t.Helper()
	url := testsrv.Postgres(t)
	open := func() *dedup.SQLStore {
		st, err := dedup.OpenSQLNamespace(context.Background(), url, "route/r")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	holder, waiter := open(), open()
	v := []dedup.Verdict{dedup.New}
	if err := holder.Reserve([]string{"k"}, time.Now(), v); err != nil || v[0] != dedup.New {
		t.Fatalf("holder's reserve: %v %v", v[0], err)
	}
	key, err := compileProgram("payload.id", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &dedupStep{key: key, store: waiter, ttl: time.Hour, now: time.Now, turn: newTurnGate()}, holder
}

func heldKeyBatch() *batch {
	return &batch{recs: []Record{{value: map[string]any{"id": "k"}}}}
}

// A record whose key a live instance holds waits for as long as that
// instance renews its reservation, past the reservation's expiry, and is a
// duplicate once the holder promotes the key. (Until the store renewed
// reservations, the waiter gave up after the expiry and a margin, or took
// the key over while the holder was still writing it.)
func TestDedupWaitsWhileHolderRenews(t *testing.T) {
	t.Parallel()
	s, holder := heldKeyStep(t)
	hold := dedup.InFlightExpiry + dedup.MaxClockLead + time.Second
	go func() {
		time.Sleep(hold)
		if err := holder.Promote([]string{"k"}, time.Now(), time.Hour); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	b := heldKeyBatch()
	if err := s.apply(&worker{}, b); err != nil {
		t.Fatalf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	if took := time.Since(start); took < hold {
		t.Errorf("decided after %v, before the holder promoted the key (%v)", took, hold)
	}
	if b.recs[0].state != stDuplicate {
		t.Errorf("record is %v, want a duplicate", b.recs[0].state)
	}
}

// A holder that dies stops renewing: its key comes free within the expiry
// and the waiting record takes it.
func TestDedupTakesKeyOfDeadHolder(t *testing.T) {
	t.Parallel()
	s, holder := heldKeyStep(t)
	go func() {
		time.Sleep(time.Second)
		holder.Close()
	}()
	start := time.Now()
	b := heldKeyBatch()
	if err := s.apply(&worker{}, b); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second+dedup.InFlightExpiry+2*time.Second {
		t.Errorf("took the key after %v", took)
	}
	if b.recs[0].state != stLive {
		t.Errorf("record is %v, want live (its key taken over)", b.recs[0].state)
	}
}

// Once the route stops, a record whose key stays held elsewhere waits the
// expiry and a margin at most, then fails the batch, so its position is
// not committed.
func TestDedupStoppingGivesUpOnHeldKey(t *testing.T) {
	t.Parallel()
	s, _ := heldKeyStep(t)
	s.stopping = func() bool { return true }
	start := time.Now()
	err := s.apply(&worker{}, heldKeyBatch())
	if err == nil || !strings.Contains(err.Error(), "still reserved by another instance") {
		t.Fatalf("stopping with the key held: %v", err)
	}
	if took, most := time.Since(start), dedup.InFlightExpiry+dedup.MaxClockLead+2*time.Second; took > most {
		t.Errorf("gave up after %v, want at most %v", took, most)
	}
}

// Two batches that each hold a key the other waits for (routes sharing
// dedup namespaces in opposite step orders) would wait forever while
// their holders renew: past the wait limit the waiter gives up with an
// error, stopping its route, and the other goes on.
func TestDedupGivesUpAfterWaitLimit(t *testing.T) {
	t.Parallel()
	s, _ := heldKeyStep(t)
	s.waitLimit = 2 * time.Second
	start := time.Now()
	err := s.apply(&worker{}, heldKeyBatch())
	if err == nil || !strings.Contains(err.Error(), "stayed reserved by another instance") {
		t.Fatalf("a key held past the wait limit: %v", err)
	}
	if took := time.Since(start); took < 2*time.Second || took > 5*time.Second {
		t.Errorf("gave up after %v, want about 2 s", took)
	}
}
