package runtime

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestTurnGateOrder: waiters come through in sequence order whatever order
// they arrive in, a pass out of turn is remembered, and release lets
// everyone through.
func TestTurnGateOrder(t *testing.T) {
	g := newTurnGate()
	var mu sync.Mutex
	var order []uint64
	var wg sync.WaitGroup
	for _, seq := range []uint64{4, 2, 3, 1, 0} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.wait(seq)
			mu.Lock()
			order = append(order, seq)
			mu.Unlock()
			g.pass(seq)
		}()
		time.Sleep(5 * time.Millisecond) // arrive in the order listed
	}
	wg.Wait()
	if fmt.Sprint(order) != "[0 1 2 3 4]" {
		t.Fatalf("through the gate in order %v, want [0 1 2 3 4]", order)
	}

	// 6 passes before 5 (a batch that never reached the step); 7 waits
	// for both.
	g.pass(6)
	done := make(chan struct{})
	go func() { g.wait(7); close(done) }()
	select {
	case <-done:
		t.Fatal("7 came through before 5 passed")
	case <-time.After(20 * time.Millisecond):
	}
	g.pass(5)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("7 still waits after 5 and 6 passed")
	}

	// After a failure nobody waits.
	g.release()
	released := make(chan struct{})
	go func() { g.wait(100); close(released) }()
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("a released gate still holds a waiter")
	}
}
