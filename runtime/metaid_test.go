package runtime

import (
	"context"
	"maps"
	"testing"
)

// metaSink is a sink that reads only programs (or not, by its flag).
type metaSink struct{ byPrograms bool }

func (s metaSink) ReadsMetaByPrograms() bool { return s.byPrograms }

// TestPendingID: an id set on a record without metadata waits outside
// Meta, and every reader still sees it: metaGet, metaView, programs
// (fast path and expr-lang), and Meta itself once flushed — by setting
// another key, or before a sink that reads Meta.
func TestPendingID(t *testing.T) {
	const idStep = "(id step)"
	tests := []struct {
		name     string
		preset   map[string]string
		ops      [][2]string // setMeta k, v
		sink     any         // flushMetaFor's sink; nil: no flush
		pending  bool
		wantMeta map[string]string // r.Meta after
		wantView map[string]string
	}{
		{name: "id alone waits", ops: [][2]string{{metaID, "a"}}, pending: true,
			wantView: map[string]string{metaID: "a"}},
		{name: "id set twice", ops: [][2]string{{metaID, "a"}, {metaID, "b"}}, pending: true,
			wantView: map[string]string{metaID: "b"}},
		{name: "another key flushes", ops: [][2]string{{metaID, "a"}, {"x", "1"}},
			wantMeta: map[string]string{metaID: "a", "x": "1"}, wantView: map[string]string{metaID: "a", "x": "1"}},
		{name: "source metadata takes the id", preset: map[string]string{"mqb.src.line": "3"}, ops: [][2]string{{metaID, "a"}},
			wantMeta: map[string]string{metaID: "a", "mqb.src.line": "3"}, wantView: map[string]string{metaID: "a", "mqb.src.line": "3"}},
		// idStep: the id step, keeping its value boxed (setIDValue).
		{name: "id step alone waits", ops: [][2]string{{idStep, "a"}}, pending: true,
			wantView: map[string]string{metaID: "a"}},
		{name: "id step, then id set again", ops: [][2]string{{idStep, "a"}, {metaID, "b"}}, pending: true,
			wantView: map[string]string{metaID: "b"}},
		{name: "id step, then id step again", ops: [][2]string{{idStep, "a"}, {idStep, "b"}}, pending: true,
			wantView: map[string]string{metaID: "b"}},
		{name: "id step, another key flushes", ops: [][2]string{{idStep, "a"}, {"x", "1"}},
			wantMeta: map[string]string{metaID: "a", "x": "1"}, wantView: map[string]string{metaID: "a", "x": "1"}},
		{name: "id step, then flushed and set", ops: [][2]string{{idStep, "a"}, {"x", "1"}, {metaID, "c"}},
			wantMeta: map[string]string{metaID: "c", "x": "1"}, wantView: map[string]string{metaID: "c", "x": "1"}},
		{name: "a sink reading Meta gets it", ops: [][2]string{{metaID, "a"}}, sink: metaSink{},
			wantMeta: map[string]string{metaID: "a"}, wantView: map[string]string{metaID: "a"}},
		{name: "a sink reading by programs does not", ops: [][2]string{{metaID, "a"}}, sink: metaSink{byPrograms: true}, pending: true,
			wantView: map[string]string{metaID: "a"}},
	}
	fast, err := compileProgram(`meta["mqb.id"]`, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := compileProgram(`meta["mqb.id"] + "!"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Record{Meta: maps.Clone(tc.preset)}
			for _, op := range tc.ops {
				if op[0] == idStep {
					r.setIDValue(op[1], any(op[1]))
					continue
				}
				r.setMeta(op[0], op[1])
			}
			if tc.sink != nil {
				flushMetaFor(tc.sink, []*Record{r})
			}
			if r.hasID != tc.pending {
				t.Errorf("pending = %v, want %v", r.hasID, tc.pending)
			}
			if !maps.Equal(r.Meta, tc.wantMeta) {
				t.Errorf("Meta = %v, want %v", r.Meta, tc.wantMeta)
			}
			if !maps.Equal(r.metaView(), tc.wantView) {
				t.Errorf("metaView = %v, want %v", r.metaView(), tc.wantView)
			}
			var ev evaluator
			id := tc.wantView[metaID]
			if s, ok, err := ev.runString(fast, r); err != nil || !ok || s != id {
				t.Errorf("%s = %q, %v, %v; want %q", fast.src, s, ok, err, id)
			}
			if v, ok, err := ev.run(fast, r); err != nil || !ok || v != any(id) {
				t.Errorf("%s run = %v, %v, %v; want %q", fast.src, v, ok, err, id)
			}
			if v, _, err := ev.run(slow, r); err != nil || v != id+"!" {
				t.Errorf("%s = %v, %v; want %q", slow.src, v, err, id+"!")
			}
		})
	}
}

// TestDeadLetterCarriesPendingID: a dead record's DLQ line holds its
// identity and the error, whether or not the id waited outside Meta.
func TestDeadLetterCarriesPendingID(t *testing.T) {
	rt := &route{name: "r"}
	r := &Record{}
	r.setMeta(metaID, "k-1")
	r.kill("bad")
	if err := rt.deadLetter(context.Background(), []*Record{r}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{metaID: "k-1", metaError: "bad"}; !maps.Equal(r.Meta, want) || r.hasID {
		t.Errorf("Meta = %v (pending %v), want %v", r.Meta, r.hasID, want)
	}
}
