package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/runtest"
)

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// waitLines waits until path has n lines.
func waitLines(t *testing.T, path string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) > 0 && len(lines) >= n {
			return lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lines after 10s, want %d: %q", path, len(lines), n, lines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSubscribeModes(t *testing.T) {
	d := t.TempDir()
	in, out := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl")
	appendFile(t, in, `{"old": 1}`+"\n")
	start := func(mode string) *runtest.Background {
		p := fileRoute("follow", in, out, "", filepath.Join(d, "state"))
		p.Routes[0].Nodes[0].Attrs["mode"] = enumV(mode)
		return startRun(context.Background(), p, testOptions(t))
	}

	// subscribe starts at the end of the file and follows it, joining a
	// line written in two pieces.
	r := start(modeSubscribe)
	time.Sleep(300 * time.Millisecond)
	appendFile(t, in, `{"new": 1}`+"\n"+`{"new":`)
	time.Sleep(250 * time.Millisecond)
	appendFile(t, in, ` 2}`+"\n")
	got := waitLines(t, out, 2)
	r.Stop(t)
	if strings.Join(got, "|") != `{"new": 1}|{"new": 2}` {
		t.Errorf("subscribe wrote %q", got)
	}

	// group_subscribe reads from the stored offset (none yet: the start),
	// and a second run resumes after what the first committed.
	os.Remove(out)
	r = start(modeGroupSubscribe)
	waitLines(t, out, 3)
	if rs := r.Stop(t).Route("follow"); rs.In != 3 {
		t.Errorf("first group_subscribe run read %d, want 3", rs.In)
	}
	appendFile(t, in, `{"later": 1}`+"\n")
	r = start(modeGroupSubscribe)
	got = waitLines(t, out, 4)
	time.Sleep(200 * time.Millisecond)
	if rs := r.Stop(t).Route("follow"); rs.In != 1 || got[3] != `{"later": 1}` {
		t.Errorf("resumed group_subscribe read %d, output %q", rs.In, got)
	}
}

func TestSubscribeLongLineInPieces(t *testing.T) {
	d := t.TempDir()
	in, out, dlq := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl"), filepath.Join(d, "dlq.jsonl")
	appendFile(t, in, "")
	p := fileRoute("long", in, out, dlq, filepath.Join(d, "state"))
	p.Routes[0].Nodes[0].Attrs["mode"] = enumV(modeSubscribe)
	p.Routes[0].Nodes[0].Attrs["max_record_bytes"] = intV(50)
	r := startRun(context.Background(), p, testOptions(t))
	time.Sleep(300 * time.Millisecond)
	appendFile(t, in, `{"a": "`+strings.Repeat("x", 40))
	time.Sleep(250 * time.Millisecond)
	appendFile(t, in, strings.Repeat("y", 40)+`"}`+"\n"+`{"short": 1}`+"\n")
	got := waitLines(t, out, 1)
	waitLines(t, dlq, 1)
	time.Sleep(100 * time.Millisecond)
	st := r.Stop(t)
	if len(got) != 1 || got[0] != `{"short": 1}` {
		t.Errorf("output %q", got)
	}
	dl := readLines(t, dlq)
	if len(dl) != 1 || !strings.Contains(dl[0], "exceeds max_record_bytes") || !strings.Contains(dl[0], "record of 89 bytes") {
		t.Errorf("dlq %q", dl)
	}
	if rs := st.Route("long"); rs.In != 2 || rs.Out != 1 || rs.DeadLettered != 1 {
		t.Errorf("stats %+v", rs)
	}
}

// TestFollowTornLastLineRewritten: a follow-mode source holding an
// unterminated last line, whose writer then cuts that line and writes on
// from its start, as mqb's own file sink does when it starts again after a
// crash left a torn line (dropTornTail). Reading on from where the held
// bytes ended glued the cut fragment to the middle of the new line, a
// record nobody wrote, and lost the record whose start it covered, the
// run ending 0. The line is read again from its start, whether the new
// bytes replace the fragment in one write or the cut is seen first; the
// records before it are not read again.
func TestFollowTornLastLineRewritten(t *testing.T) {
	var head strings.Builder
	for i := range 200 { // past the 1 KiB the file's identity hashes
		fmt.Fprintf(&head, `{"n": %d}`+"\n", i)
	}
	const torn = `{"n": 200, "v": "aa`
	const rest = `{"n": 201, "v": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}` + "\n" + `{"n": 202}` + "\n"
	for _, tc := range []struct {
		name string
		cut  bool // truncate, and let the source see it, before writing on
	}{
		{"written over in one write", false},
		{"cut, then written", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			in, out := filepath.Join(d, "in.jsonl"), filepath.Join(d, "out.jsonl")
			appendFile(t, in, head.String()+torn)
			p := fileRoute("follow", in, out, "", filepath.Join(d, "state"))
			p.Routes[0].Nodes[0].Attrs["mode"] = enumV(modeGroupSubscribe)
			r := startRun(context.Background(), p, testOptions(t))
			waitLines(t, out, 200)
			time.Sleep(300 * time.Millisecond) // the source holds the torn line
			f, err := os.OpenFile(in, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			at := int64(head.Len())
			if tc.cut {
				if err := f.Truncate(at); err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond)
			}
			if _, err := f.WriteAt([]byte(rest), at); err != nil {
				t.Fatal(err)
			}
			f.Close()
			waitLines(t, out, 202)
			time.Sleep(300 * time.Millisecond)
			r.Stop(t)
			got := readLines(t, out)
			want := strings.Split(head.String()+rest, "\n")
			want = want[:len(want)-1]
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("output has %d lines, want %d; the last ones %q", len(got), len(want), got[max(0, len(got)-3):])
			}
		})
	}
}
