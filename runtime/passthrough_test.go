package runtime

import (
	"bytes"
	"context"
	"testing"
)

// TestGroupLines: the lines cut from a group's arenas are, byte for byte,
// what AppendLines writes for the group's live records, whichever records
// are dead or filtered; a group that cannot go as read says so.
func TestGroupLines(t *testing.T) {
	type rec struct {
		payload string
		state   recState
		dirty   bool
		added   bool // added with Add, not copied into the arena
	}
	live := func(p string) rec { return rec{payload: p} }
	tests := []struct {
		name    string
		batches [][]rec
		ok      bool
	}{
		{"all live", [][]rec{{live(`{"a":1}`), live(`x`)}, {live(`y`)}}, true},
		{"dead in the middle", [][]rec{{live(`a`), {payload: `bad`, state: stDead}, live(`c`)}}, true},
		{"dead first and last", [][]rec{{{payload: `bad`, state: stDead}, live(`b`), {payload: `f`, state: stFiltered}}}, true},
		{"nothing live", [][]rec{{{payload: `d`, state: stDuplicate}}}, true},
		{"empty payload", [][]rec{{live(``), live(`z`)}}, true},
		{"changed by a step", [][]rec{{live(`a`), {payload: `b`, dirty: true}}}, false},
		{"not in the arena", [][]rec{{live(`a`)}, {{payload: `b`, added: true}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var group []*batch
			var live []*Record
			for _, recs := range tc.batches {
				b := &batch{}
				for _, r := range recs {
					if r.added {
						b.Add(Record{Payload: []byte(r.payload)})
					} else {
						b.AddCopy(Record{}, []byte(r.payload))
					}
					last := &b.recs[len(b.recs)-1]
					last.state, last.dirty = r.state, r.dirty
				}
				group = append(group, b)
			}
			for _, b := range group {
				for i := range b.recs {
					if b.recs[i].state == stLive {
						live = append(live, &b.recs[i])
					}
				}
			}
			lines, ok := groupLines(group, nil)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			want := appendLines(nil, live, false)
			if got := bytes.Join(lines, nil); !bytes.Equal(got, want) {
				t.Errorf("lines %q, want %q", got, want)
			}
		})
	}
}

// TestRecycledBatch: a batch handed back is empty when NewBatchArena gives
// it out again, and its records hold nothing of their last use.
func TestRecycledBatch(t *testing.T) {
	b := NewBatchArena(4, 64)
	b.AddCopy(Record{Seq: 7, Meta: map[string]string{"k": "v"}}, []byte("line"))
	b.spans = append(b.spans, ackSpan{n: 1})
	recs := b.recs[:1]
	recycle([]*batch{b})
	if recs[0].Meta != nil || recs[0].Payload != nil {
		t.Errorf("a recycled record still holds %+v", recs[0])
	}
	if b.Len() != 0 || b.PayloadBytes() != 0 || len(b.spans) != 0 || b.copied != 0 || b.pooled {
		t.Errorf("a recycled batch is not empty: %d records, %d bytes, %d spans, %d copied", b.Len(), b.PayloadBytes(), len(b.spans), b.copied)
	}
}

// releasingSink keeps nothing of a record past Write when releases says so.
type releasingSink struct{ releases bool }

func (releasingSink) Write(context.Context, []*Record) error { return nil }
func (releasingSink) Close() error                           { return nil }
func (s releasingSink) ReleasesRecords() bool                { return s.releases }

// envelopeSink is a DLQ target that is not a LineSink.
type envelopeSink struct{}

func (envelopeSink) Write(context.Context, []*Record) error { return nil }
func (envelopeSink) Close() error                           { return nil }

// TestReleasingSinkRecycles: a route whose sink says it keeps no record
// past its write reuses its batches, as a line route does, unless a
// handler, a DLQ target that is not a line sink, or a source answering
// after the ack may still hold them; its sink still gets records.
func TestReleasingSinkRecycles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sink     Sink
		dlq      Sink
		handler  bool
		recycles bool
	}{
		{"releasing", releasingSink{true}, nil, false, true},
		{"not releasing", releasingSink{false}, nil, false, false},
		{"plain sink", envelopeSink{}, nil, false, false},
		{"with a handler", releasingSink{true}, nil, true, false},
		{"DLQ of envelopes", releasingSink{true}, envelopeSink{}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &route{sink: tc.sink, dlq: tc.dlq}
			rt.linesPassThrough(tc.handler)
			if rt.recycles != tc.recycles {
				t.Errorf("recycles = %v, want %v", rt.recycles, tc.recycles)
			}
			if rt.lineSink != nil {
				t.Errorf("a sink of records was taken as a line sink")
			}
		})
	}
}
