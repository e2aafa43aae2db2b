package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// writeExport writes n order lines, numbered from first, tagged with gen
// (another export has other content).
func writeExport(t *testing.T, path string, gen string, first, n int) {
	t.Helper()
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, `{"order_id": "%s-%d", "export": %q}`+"\n", gen, i, gen)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// partsRoute is a consume-mode file source writing parts into dir.
func partsRoute(name, in, parts, state string) plan.Route {
	nodes := []plan.Node{
		{ID: "n0", Role: plan.RoleSource, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(in), "mode": enumV(modeConsume), "checkpoint_store": strV("pebble://" + state)}},
		{ID: "n1", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{
			"path": strV(parts), "name_by": enumV("source_position")}},
	}
	return plan.Route{Name: name, Guarantee: plan.EffectivelyOnce, Concurrency: 1, BatchSize: 100, Nodes: nodes, Edges: chain(nodes)}
}

// partLines reads every line of every part file in dir.
func partLines(t *testing.T, dir string) []string {
	t.Helper()
	parts, _ := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	var lines []string
	for _, p := range parts {
		lines = append(lines, readLines(t, p)...)
	}
	return lines
}

// TestFileSourceRefusesReplacedFile is the experiment: 1,000
// records consumed, then the file re-exported under the same name with
// 1,200 other records. Resuming at the old offset skipped 1,000 of them
// with exit 0; the route must refuse, naming the state and how to reset
// it, whether the export rewrote the file in place or replaced it. After
// the reset every new record lands: none is taken for a duplicate of the
// old file's parts.
func TestFileSourceRefusesReplacedFile(t *testing.T) {
	for _, replace := range []string{"in place", "renamed over"} {
		t.Run(replace, func(t *testing.T) {
			d := t.TempDir()
			in, parts, state := filepath.Join(d, "orders.jsonl"), filepath.Join(d, "parts"), filepath.Join(d, "state")
			p := plan.Plan{Version: plan.Version, Routes: []plan.Route{partsRoute("load", in, parts, state)}}
			writeExport(t, in, "first", 0, 1000)
			if rs := runRoute(t, p, "load"); rs.Out != 1000 {
				t.Fatalf("first export: out %d, want 1000", rs.Out)
			}
			if replace == "in place" {
				writeExport(t, in, "second", 0, 1200)
			} else {
				writeExport(t, in+".new", "second", 0, 1200)
				if err := os.Rename(in+".new", in); err != nil {
					t.Fatal(err)
				}
			}
			runRefused(t, p, []string{"route load", in, "mqbc state reset FILE.mqb load", state, "byte"})

			// The reset: every record of the new export lands.
			if err := os.RemoveAll(state); err != nil {
				t.Fatal(err)
			}
			rs := runRoute(t, p, "load")
			if rs.Out != 1200 || rs.Deduplicated != 0 {
				t.Errorf("after the reset: out %d deduplicated %d, want 1200 and 0", rs.Out, rs.Deduplicated)
			}
			second := 0
			for _, l := range partLines(t, parts) {
				if strings.Contains(l, `"second"`) {
					second++
				}
			}
			if second != 1200 {
				t.Errorf("%d records of the second export in the parts, want 1200", second)
			}
		})
	}
}

// TestFileSourceResumesSameFile: the same file, grown (appended to), is
// resumed where the checkpoint is, even when it was shorter than the
// fingerprint at first; a file shorter than the offset is refused.
func TestFileSourceResumesSameFile(t *testing.T) {
	d := t.TempDir()
	in, parts, state := filepath.Join(d, "orders.jsonl"), filepath.Join(d, "parts"), filepath.Join(d, "state")
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{partsRoute("load", in, parts, state)}}
	writeExport(t, in, "a", 0, 3) // shorter than the fingerprint
	if rs := runRoute(t, p, "load"); rs.Out != 3 {
		t.Fatalf("out %d, want 3", rs.Out)
	}
	f, err := os.OpenFile(in, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 100; i++ {
		fmt.Fprintf(f, `{"order_id": "a-%d", "export": "a"}`+"\n", i)
	}
	f.Close()
	if rs := runRoute(t, p, "load"); rs.Out != 97 || rs.Deduplicated != 0 {
		t.Fatalf("resumed: out %d deduplicated %d, want 97 and 0", rs.Out, rs.Deduplicated)
	}
	if got := len(partLines(t, parts)); got != 100 {
		t.Errorf("%d lines in the parts, want 100", got)
	}
	// Truncated in place to less than the offset.
	data, _ := os.ReadFile(in)
	if err := os.WriteFile(in, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	runRefused(t, p, []string{"shorter", "mqbc state reset FILE.mqb load"})
}

// TestFileSourceLegacyCheckpoint: a checkpoint written before checkpoints
// named their file is taken once (with the part files of that time, named
// without an identity, still covering its records), and rewritten with
// the file's identity.
func TestFileSourceLegacyCheckpoint(t *testing.T) {
	d := t.TempDir()
	in, parts, state := filepath.Join(d, "orders.jsonl"), filepath.Join(d, "parts"), filepath.Join(d, "state")
	writeExport(t, in, "a", 0, 100)
	data, _ := os.ReadFile(in)
	lines := strings.SplitAfter(string(data), "\n")
	offset := int64(len(strings.Join(lines[:50], "")))
	st, err := checkpoint.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Save("load", checkpoint.Position{Source: in, Mode: modeConsume, NextIndex: 50, Offset: offset}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// What an older mqb wrote past the checkpoint before it stopped.
	if err := os.MkdirAll(parts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parts, partFileName("orders", 0, runtime.RecordSpan(50, 59))), []byte(strings.Join(lines[50:60], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := plan.Plan{Version: plan.Version, Routes: []plan.Route{partsRoute("load", in, parts, state)}}
	rs := runRoute(t, p, "load")
	if rs.In != 50 || rs.Out != 40 || rs.Deduplicated != 10 {
		t.Errorf("in %d out %d deduplicated %d, want 50, 40, 10", rs.In, rs.Out, rs.Deduplicated)
	}
	if got := len(partLines(t, parts)); got != 50 {
		t.Errorf("%d lines in the parts, want 50", got)
	}
	st, err = checkpoint.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cp, _, err := st.Load("load")
	if err != nil {
		t.Fatal(err)
	}
	path, id := CheckpointSource(cp.Source)
	if path != in || !strings.Contains(id, "inode") || cp.NextIndex != 100 {
		t.Errorf("checkpoint after the run: %+v (path %q, identity %q)", cp, path, id)
	}
}

// TestPartNamesCarrySourceIdentity: two routes reading files of the same
// base name write parts into one directory (and each into its own); every
// record of both lands. The second route's records were all taken for
// duplicates of the first's.
func TestPartNamesCarrySourceIdentity(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			d := t.TempDir()
			for _, sub := range []string{"a", "b"} {
				if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
					t.Fatal(err)
				}
				writeExport(t, filepath.Join(d, sub, "orders.jsonl"), sub, 0, 500)
			}
			partsA, partsB := filepath.Join(d, "parts"), filepath.Join(d, "parts")
			if !shared {
				partsA, partsB = filepath.Join(d, "parts-a"), filepath.Join(d, "parts-b")
			}
			p := plan.Plan{Version: plan.Version, Routes: []plan.Route{
				partsRoute("load_a", filepath.Join(d, "a", "orders.jsonl"), partsA, filepath.Join(d, "state")),
				partsRoute("load_b", filepath.Join(d, "b", "orders.jsonl"), partsB, filepath.Join(d, "state")),
			}}
			st, err := runtime.Run(context.Background(), p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []string{"load_a", "load_b"} {
				if rs := st.Route(r); rs.Out != 500 || rs.Deduplicated != 0 {
					t.Errorf("%s: out %d deduplicated %d, want 500 and 0", r, rs.Out, rs.Deduplicated)
				}
			}
			got := len(partLines(t, partsA))
			if !shared {
				got += len(partLines(t, partsB))
			}
			if got != 1000 {
				t.Errorf("%d lines in the parts, want 1000", got)
			}
			// A rerun with the state gone replays both files: every record
			// is recognised in its own route's parts.
			os.RemoveAll(filepath.Join(d, "state"))
			st, err = runtime.Run(context.Background(), p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []string{"load_a", "load_b"} {
				if rs := st.Route(r); rs.Out != 0 || rs.Deduplicated != 500 {
					t.Errorf("replay %s: out %d deduplicated %d, want 0 and 500", r, rs.Out, rs.Deduplicated)
				}
			}
		})
	}
}

// TestConsumeUnterminatedLastLine: consume reads a finished file, so a
// last line without a newline is its last record. A file that grows past
// such a line afterwards had been read while it was still being written:
// resuming after that line would split a record, so it is refused; a file
// that grows with the newline first resumes.
func TestConsumeUnterminatedLastLine(t *testing.T) {
	for _, tt := range []struct {
		name, more string
		refused    bool
		out        []string
	}{
		{"line continued", `2, "z": 1}` + "\n", true, nil},
		{"newline first", "\n" + `{"n": 3}` + "\n", false, []string{`{"n": 3}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := t.TempDir()
			in, out, state := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "state")
			if err := os.WriteFile(in, []byte(`{"n": 1}`+"\n"+`{"n": `), 0o644); err != nil {
				t.Fatal(err)
			}
			p := fileRoute("tail", in, out, filepath.Join(d, "dlq.jsonl"), state)
			st, err := runtime.Run(context.Background(), p, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			if rs := st.Route("tail"); rs.In != 2 {
				t.Fatalf("in %d, want 2 (the unterminated last line is a record)", rs.In)
			}
			appendFile(t, in, tt.more)
			os.Remove(out)
			if tt.refused {
				runRefused(t, p, []string{"no newline", "mqbc state reset FILE.mqb tail"})
				return
			}
			if _, err := runtime.Run(context.Background(), p, testOptions(t)); err != nil {
				t.Fatal(err)
			}
			if got := readLines(t, out); strings.Join(got, "|") != strings.Join(tt.out, "|") {
				t.Errorf("resumed output %q, want %q", got, tt.out)
			}
		})
	}
}

// followRoute is fileRoute in a follow mode.
func followRoute(mode, in, out, state string) plan.Plan {
	p := fileRoute("follow", in, out, "", state)
	p.Routes[0].Nodes[0].Attrs["mode"] = enumV(mode)
	return p
}

// TestFollowRotation: the watched file is renamed away and a new one
// created at its path; the old file is read until its writer has moved on
// — including a line it finishes after the rotation, which arrives whole,
// and one more it writes — then the new one from its start. Before, the
// new file was never read.
func TestFollowRotation(t *testing.T) {
	for _, mode := range []string{modeSubscribe, modeGroupSubscribe} {
		t.Run(mode, func(t *testing.T) {
			d := t.TempDir()
			in, out := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl")
			appendFile(t, in, "")
			r := startRun(context.Background(), followRoute(mode, in, out, filepath.Join(d, "state")), testOptions(t))
			time.Sleep(300 * time.Millisecond)
			appendFile(t, in, `{"old": 1}`+"\n"+`{"old": `)
			waitLines(t, out, 1)
			if err := os.Rename(in, in+".1"); err != nil {
				t.Fatal(err)
			}
			appendFile(t, in, `{"new": 1}`+"\n")
			time.Sleep(300 * time.Millisecond)
			appendFile(t, in+".1", `2}`+"\n") // the old file's writer finishes its line
			appendFile(t, in, `{"new": 2}`+"\n")
			time.Sleep(300 * time.Millisecond)
			appendFile(t, in+".1", `{"old": 3}`+"\n") // and writes one more before it moves on
			got := waitLines(t, out, 5)
			time.Sleep(200 * time.Millisecond)
			r.Stop(t)
			if strings.Join(got, "|") != `{"old": 1}|{"old": 2}|{"old": 3}|{"new": 1}|{"new": 2}` {
				t.Errorf("output %q", got)
			}
		})
	}
}

// TestGroupSubscribeRotatedWhileDown: the file is rotated while the route
// is stopped; the restarted route finishes the old file under its new name
// from the checkpoint, then reads the new file from its start. When the
// old file is gone, the route refuses rather than skip its rest.
func TestGroupSubscribeRotatedWhileDown(t *testing.T) {
	d := t.TempDir()
	in, out, state := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "state")
	appendFile(t, in, `{"a": 1}`+"\n")
	p := followRoute(modeGroupSubscribe, in, out, state)
	r := startRun(context.Background(), p, testOptions(t))
	waitLines(t, out, 1)
	time.Sleep(200 * time.Millisecond)
	r.Stop(t)

	appendFile(t, in, `{"a": 2}`+"\n"+`{"a": 3}`) // the writer's last line, unterminated
	if err := os.Rename(in, in+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, in, `{"b": 1}`+"\n")
	r = startRun(context.Background(), p, testOptions(t))
	got := waitLines(t, out, 4)
	time.Sleep(200 * time.Millisecond)
	r.Stop(t)
	if strings.Join(got, "|") != `{"a": 1}|{"a": 2}|{"a": 3}|{"b": 1}` {
		t.Errorf("output %q", got)
	}

	// Rotated again while down, and the rotated file removed.
	appendFile(t, in, `{"b": 2}`+"\n")
	if err := os.Rename(in, in+".2"); err != nil {
		t.Fatal(err)
	}
	os.Remove(in + ".2")
	appendFile(t, in, `{"c": 1}`+"\n")
	runRefused(t, p, []string{"not the one the checkpoint was taken in", "mqbc state reset FILE.mqb follow", state})
}

// TestGroupSubscribeTornLineAcrossRestart: half a line is written, the
// route stops and starts again, then the rest arrives: one whole record.
func TestGroupSubscribeTornLineAcrossRestart(t *testing.T) {
	d := t.TempDir()
	in, out, state := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "state")
	appendFile(t, in, `{"a": 1}`+"\n"+`{"a": `)
	p := followRoute(modeGroupSubscribe, in, out, state)
	r := startRun(context.Background(), p, testOptions(t))
	waitLines(t, out, 1)
	time.Sleep(300 * time.Millisecond)
	r.Stop(t)
	r = startRun(context.Background(), p, testOptions(t))
	time.Sleep(300 * time.Millisecond)
	appendFile(t, in, `2}`+"\n")
	got := waitLines(t, out, 2)
	time.Sleep(200 * time.Millisecond)
	r.Stop(t)
	if strings.Join(got, "|") != `{"a": 1}|{"a": 2}` {
		t.Errorf("output %q", got)
	}
}

func TestFileSourceCheckpointEncoding(t *testing.T) {
	id := fileIdentity{Dev: 2049, Ino: 77, HeadLen: 1024, Head: "00ff", Parts: "abc123"}
	for _, path := range []string{"/data/orders.jsonl", "/data/with space|pipe.jsonl", ""} {
		got, gotID, ok := decodeFileSource(encodeFileSource(path, id))
		if !ok || got != path || gotID != id {
			t.Errorf("%q: decoded %q %+v %v", path, got, gotID, ok)
		}
	}
	if got, _, ok := decodeFileSource("/data/orders.jsonl"); ok || got != "/data/orders.jsonl" {
		t.Errorf("a legacy source decodes as %q %v", got, ok)
	}
}
