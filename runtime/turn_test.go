package runtime

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// TestDedupKeepsFirstInSourceOrder: with several processing workers the
// record a dedup step keeps for a key is its first in the input, in every
// run, so a clean run and a crashed one keep the same records. Without the
// turn gate the workers race for each key's reservation and a later
// record of a key is sometimes kept instead.
func TestDedupKeepsFirstInSourceOrder(t *testing.T) {
	const keys, copies = 40, 30
	for run := range 4 {
		dir := t.TempDir()
		var lines []string
		for i := range keys * copies {
			lines = append(lines, fmt.Sprintf(`{"k":"k%02d","seq":%d}`, i%keys, i))
		}
		writeLines(t, filepath.Join(dir, "in.jsonl"), lines...)
		p := compileMQB(t, `
route first {
  batch_size  = 2
  concurrency = 4
  from file { path = "in.jsonl" }
  dedup { key = payload.k, ttl = 1h }
  to file { path = "out.jsonl" }
}
`)
		runIn(t, dir, p)
		f, err := os.Open(filepath.Join(dir, "out.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]int{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var rec struct {
				K   string `json:"k"`
				Seq int    `json:"seq"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%q: %v", sc.Text(), err)
			}
			if prev, ok := kept[rec.K]; ok {
				t.Fatalf("run %d: key %s kept twice (seq %d and %d)", run, rec.K, prev, rec.Seq)
			}
			kept[rec.K] = rec.Seq
		}
		f.Close()
		if len(kept) != keys {
			t.Fatalf("run %d: %d keys kept, want %d", run, len(kept), keys)
		}
		for i := range keys {
			k := fmt.Sprintf("k%02d", i)
			if kept[k] != i {
				t.Fatalf("run %d: key %s kept seq %d, want its first record, seq %d", run, k, kept[k], i)
			}
		}
	}
}
