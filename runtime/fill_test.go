package runtime

import (
	"context"
	"testing"
	"time"
)

func TestFill(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		held       int  // values in the channel before Fill
		late       int  // values sent after Fill started, one by one
		closeAfter bool // close the channel after those
		max        int
		want       int
		wantClosed bool
	}{
		{name: "takes what is held, up to max", ctx: context.Background(), held: 5, max: 3, want: 3},
		{name: "all held", ctx: context.Background(), held: 3, max: 10, want: 3},
		{name: "closed channel", ctx: context.Background(), held: 2, closeAfter: true, max: 10, want: 2, wantClosed: true},
		{name: "waits for late values", ctx: context.Background(), late: 4, closeAfter: true, max: 10, want: 4, wantClosed: true},
		{name: "late values fill max", ctx: context.Background(), late: 4, max: 4, want: 4},
		{name: "an ended ctx stops the wait", ctx: canceled, max: 10, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan int, tc.held+tc.late)
			for i := range tc.held {
				ch <- i
			}
			if tc.late == 0 && tc.closeAfter {
				close(ch)
			}
			if tc.late > 0 {
				go func() {
					for i := range tc.late {
						ch <- tc.held + i
					}
					if tc.closeAfter {
						close(ch)
					}
				}()
			}
			// A late value may miss the linger on a loaded machine:
			// FillLinger is a millisecond, so retry the whole case.
			b := NewBatch(0)
			var closed bool
			var got []int
			deadline := time.Now().Add(10 * time.Second)
			for {
				closed = Fill(tc.ctx, b, tc.max, ch, func(v int) {
					got = append(got, v)
					b.Add(Record{Seq: uint64(v)})
				})
				if closed || b.Len() >= tc.want || time.Now().After(deadline) {
					break
				}
			}
			if b.Len() != tc.want || closed != tc.wantClosed {
				t.Fatalf("Fill added %d (closed %v), want %d (closed %v)", b.Len(), closed, tc.want, tc.wantClosed)
			}
			for i, v := range got {
				if v != i {
					t.Fatalf("values %v, want them in order", got)
				}
			}
		})
	}
}
