package runtime

import (
	"bytes"
	"context"
	"reflect"
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
	b.slots = append(b.slots, "decoded")
	recs, slots := b.recs[:1], b.slots[:1]
	recycle([]*batch{b})
	if recs[0].Meta != nil || recs[0].Payload != nil {
		t.Errorf("a recycled record still holds %+v", recs[0])
	}
	if slots[0] != nil || len(b.slots) != 0 {
		t.Errorf("a recycled batch still holds decoded values %v", slots)
	}
	if b.Len() != 0 || b.PayloadBytes() != 0 || len(b.spans) != 0 || b.copied != 0 || b.pooled {
		t.Errorf("a recycled batch is not empty: %d records, %d bytes, %d spans, %d copied", b.Len(), b.PayloadBytes(), len(b.spans), b.copied)
	}
}

// forgetfulSink is a sink that says whether it keeps records past Write.
type forgetfulSink struct{ forgets bool }

func (forgetfulSink) Write(context.Context, []*Record) error { return nil }
func (forgetfulSink) Close() error                           { return nil }
func (s forgetfulSink) ReleasesRecords() bool                { return s.forgets }

// keepingSink is a sink that says nothing about what it keeps.
type keepingSink struct{}

func (keepingSink) Write(context.Context, []*Record) error { return nil }
func (keepingSink) Close() error                           { return nil }

// TestRecyclesOnlyWhatNothingKeeps: a route reuses its batches only when
// its sink and DLQ keep nothing of a record once written (a line sink, or
// a ReleasingSink saying so) and no handler, output step or step off
// the allow-list could keep one; a sink writing records, not lines, still
// gets records.
func TestRecyclesOnlyWhatNothingKeeps(t *testing.T) {
	var lineDLQ LineSink = &lineSinkStub{}
	tests := []struct {
		name     string
		sink     sink
		dlq      sink
		steps    []step
		outSteps []recordStep
		handler  bool
		want     bool
		alias    bool // decoded values alias the batch (payloadSlots.alias)
	}{
		{name: "forgetting sink", sink: forgetfulSink{true}, steps: []step{&idStep{}, &dedupStep{}}, want: true},
		{name: "forgetting sink, line DLQ", sink: forgetfulSink{true}, dlq: lineDLQ, want: true, alias: true},
		{name: "forgetting sink, id and filter", sink: forgetfulSink{true}, steps: []step{&idStep{}, &filterStep{}}, want: true, alias: true},
		{name: "sink that does not forget", sink: forgetfulSink{false}},
		{name: "sink that says nothing", sink: keepingSink{}},
		{name: "record DLQ", sink: forgetfulSink{true}, dlq: keepingSink{}},
		{name: "handler", sink: forgetfulSink{true}, handler: true},
		{name: "output step", sink: forgetfulSink{true}, outSteps: []recordStep{&filterStep{}}},
		{name: "map step", sink: forgetfulSink{true}, steps: []step{&mapStep{}}},
		{name: "line sink", sink: &lineSinkStub{}, want: true, alias: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt := &route{sink: tc.sink, dlq: tc.dlq, steps: tc.steps, outSteps: tc.outSteps, slots: &payloadSlots{}}
			rt.linesPassThrough(tc.handler)
			if rt.recycles != tc.want {
				t.Errorf("recycles = %v, want %v", rt.recycles, tc.want)
			}
			if rt.slots.alias != tc.alias {
				t.Errorf("alias = %v, want %v", rt.slots.alias, tc.alias)
			}
			if _, lines := tc.sink.(*lineSinkStub); rt.lineSink != nil != (lines && tc.want) {
				t.Errorf("lineSink = %v", rt.lineSink)
			}
		})
	}
}

// lineSinkStub is a sink writing bare lines.
type lineSinkStub struct{ keepingSink }

func (*lineSinkStub) WriteLines(context.Context, [][]byte) error { return nil }
func (*lineSinkStub) WritesLines() bool                          { return true }

// blockSourceStub is a source that can hand blocks and says whether it
// was asked to.
type blockSourceStub struct {
	Source
	asked bool
}

func (s *blockSourceStub) PassBlocks() { s.asked = true }

// TestBlocksOnlyWhereNothingReadsARecord: the route asks its source for
// blocks of lines only when no step, handler, decoded payload, per-record
// expression or tap could look at a record and its sink writes lines as
// they are.
func TestBlocksOnlyWhereNothingReadsARecord(t *testing.T) {
	tests := []struct {
		name string
		edit func(rt *route)
		want bool
	}{
		{"text into a line sink", func(*route) {}, true},
		{"raw", func(rt *route) { rt.srcFormat = "raw" }, true},
		{"with a line DLQ", func(rt *route) { rt.dlq = &lineSinkStub{} }, true},
		{"json (checked line by line)", func(rt *route) { rt.srcFormat = "json" }, false},
		{"an id step", func(rt *route) { rt.steps = []step{&idStep{}} }, false},
		{"a filter", func(rt *route) { rt.steps = []step{&filterStep{}} }, false},
		{"an output step", func(rt *route) { rt.outSteps = []recordStep{&filterStep{}} }, false},
		{"payload read", func(rt *route) { rt.needPayload = true }, false},
		{"decoded slots", func(rt *route) { rt.slots = &payloadSlots{} }, false},
		{"a sink expression", func(rt *route) { rt.sinkProgs = []*program{{}} }, false},
		{"a tap", func(rt *route) { rt.tap = NewTap() }, false},
		{"a sink writing records", func(rt *route) { rt.sink, rt.lineSink = keepingSink{}, nil }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &blockSourceStub{}
			rt := &route{src: src, srcFormat: "text", sink: &lineSinkStub{}}
			tc.edit(rt)
			rt.linesPassThrough(false)
			rt.blocksPassThrough()
			if src.asked != tc.want {
				t.Errorf("asked for blocks: %v, want %v", src.asked, tc.want)
			}
		})
	}
	src := &blockSourceStub{}
	rt := &route{src: src, srcFormat: "text", sink: &lineSinkStub{}}
	rt.linesPassThrough(true) // a handler
	if rt.blocksPassThrough(); src.asked {
		t.Error("asked for blocks on a route with a handler")
	}
}

// TestFreshRecords: the records freshRecords returns are an empty slice
// with room for n, every one of them the zero Record (its page writes
// leave them so), for counts that end inside a page and past several.
func TestFreshRecords(t *testing.T) {
	for _, n := range []int{0, 1, 19, 20, 21, 1024, 4097} {
		recs := freshRecords(n)
		if len(recs) != 0 || cap(recs) != n {
			t.Fatalf("freshRecords(%d): len %d cap %d, want 0 and %d", n, len(recs), cap(recs), n)
		}
		for i, r := range recs[:n] {
			if !reflect.DeepEqual(r, Record{}) {
				t.Fatalf("freshRecords(%d)[%d] = %+v, want the zero Record", n, i, r)
			}
		}
	}
}
