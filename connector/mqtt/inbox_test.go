package mqtt

import (
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// The inbox never makes the client wait below its limit, hands messages
// on in order, and past its limit waits until forward takes them.
func TestInbox(t *testing.T) {
	var b inbox
	done := make(chan struct{})
	defer close(done)
	for i := range inboxLimit {
		b.put(delivery{msg: &paho.Publish{PacketID: uint16(i)}, gen: uint64(i)}, done)
	}
	put := make(chan struct{})
	go func() {
		b.put(delivery{gen: uint64(inboxLimit)}, done) // full: waits for forward
		close(put)
	}()
	select {
	case <-put:
		t.Fatal("put past the limit did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	out := make(chan delivery)
	go b.forward(out, done)
	for i := range inboxLimit + 1 {
		select {
		case d := <-out:
			if d.gen != uint64(i) {
				t.Fatalf("message %d came as %d", i, d.gen)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("message %d never came", i)
		}
	}
	<-put
}
