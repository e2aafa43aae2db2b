package file

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/plantest"
	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// globRoute is a route reading path (a glob or a directory) in mode,
// tagging each record with the file and line it came from, into out.
func globRoute(t testing.TB, path, mode, out, state string) plan.Plan {
	t.Helper()
	return plantest.Compile(t, fmt.Sprintf(`route glob {
  from file { path = %q, mode = %s, checkpoint_store = %q }
  map { src = meta["mqb.src.file"] + ":" + meta["mqb.src.line"] }
  to file { path = %q }
}
`, path, mode, "pebble://"+state, out))
}

// srcOf reads out's lines as (src, n) pairs: which file and line each
// record says it came from, and the n it carries.
func srcOf(t testing.TB, out string) []string {
	t.Helper()
	var got []string
	for _, l := range readLines(t, out) {
		var r struct {
			Src string `json:"src"`
			N   int    `json:"n"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		got = append(got, fmt.Sprintf("%s=%d", r.Src, r.N))
	}
	return got
}

// writeNumbered writes lines {"n": from} … {"n": from+count-1} to path.
func writeNumbered(t testing.TB, path string, from, count int) {
	t.Helper()
	var b strings.Builder
	for i := from; i < from+count; i++ {
		fmt.Fprintf(&b, `{"n": %d}`+"\n", i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGlobReadsFilesInNameOrder: a glob and a directory read their files
// in name order, each record naming its file and its line in it; a
// directory skips dot-files and subdirectories, a glob what does not
// match.
func TestGlobReadsFilesInNameOrder(t *testing.T) {
	cases := []struct {
		name, path string
		want       []string
	}{
		{"glob", "logs/*.log", []string{"logs/a.log:0=0", "logs/a.log:1=1", "logs/b.log:0=10", "logs/b.log:1=11", "logs/b.log:2=12"}},
		{"directory", "logs/", []string{"logs/a.log:0=0", "logs/a.log:1=1", "logs/b.log:0=10", "logs/b.log:1=11", "logs/b.log:2=12", "logs/c.txt:0=20"}},
		{"no match", "logs/*.none", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			logs := filepath.Join(d, "logs")
			if err := os.MkdirAll(filepath.Join(logs, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeNumbered(t, filepath.Join(logs, "b.log"), 10, 3) // written first, read second
			writeNumbered(t, filepath.Join(logs, "a.log"), 0, 2)
			writeNumbered(t, filepath.Join(logs, "c.txt"), 20, 1)
			writeNumbered(t, filepath.Join(logs, ".hidden"), 30, 1)
			writeNumbered(t, filepath.Join(logs, "sub", "d.log"), 40, 1)
			p := globRoute(t, tc.path, "consume", "out.jsonl", filepath.Join(d, "state"))
			runtest.RunIn(t, d, p)
			var got []string
			if _, err := os.Stat(filepath.Join(d, "out.jsonl")); err == nil {
				got = srcOf(t, filepath.Join(d, "out.jsonl"))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("read\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestGlobResumes: a second run reads only the file added after the last
// one read (its name sorts after it), not the finished files again.
func TestGlobResumes(t *testing.T) {
	d := t.TempDir()
	logs := filepath.Join(d, "logs")
	os.MkdirAll(logs, 0o755)
	writeNumbered(t, filepath.Join(logs, "2026-01-01.log"), 0, 3)
	writeNumbered(t, filepath.Join(logs, "2026-01-02.log"), 3, 2)
	p := globRoute(t, "logs/*.log", "consume", "out.jsonl", filepath.Join(d, "state"))
	runtest.RunIn(t, d, p)
	// Finished files deleted, one added: only the new one is read.
	os.Remove(filepath.Join(logs, "2026-01-01.log"))
	writeNumbered(t, filepath.Join(logs, "2026-01-03.log"), 5, 2)
	st := runtest.RunIn(t, d, p)
	want := []string{
		"logs/2026-01-01.log:0=0", "logs/2026-01-01.log:1=1", "logs/2026-01-01.log:2=2",
		"logs/2026-01-02.log:0=3", "logs/2026-01-02.log:1=4",
		"logs/2026-01-03.log:0=5", "logs/2026-01-03.log:1=6",
	}
	if got := srcOf(t, filepath.Join(d, "out.jsonl")); !slices.Equal(got, want) {
		t.Errorf("after two runs\n%q\nwant\n%q", got, want)
	}
	if rs := st.Route("glob"); rs.In != 2 {
		t.Errorf("second run read %d records, want 2 (the new file only)", rs.In)
	}
}

// TestGlobRefusesReplacedFile: a route stopped inside a file (a bad line
// and no dlq) refuses to resume when that file was replaced, or deleted,
// since: it would skip or lose its unread lines quietly. Put back, the
// route resumes in it and reads every line once.
func TestGlobRefusesReplacedFile(t *testing.T) {
	d := t.TempDir()
	logs := filepath.Join(d, "logs")
	os.MkdirAll(logs, 0o755)
	writeNumbered(t, filepath.Join(logs, "a.log"), 0, 2)
	b := filepath.Join(logs, "b.log")
	bad := `{"n": 2}` + "\n" + `{"n": 3}` + "\n" + `{"n": broken` + "\n" + `{"n": 5}` + "\n"
	os.WriteFile(b, []byte(bad), 0o644)
	p := globRoute(t, "logs/*.log", "consume", "out.jsonl", filepath.Join(d, "state"))
	p.Routes[0].BatchSize = 1
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = d, filepath.Join(d, "state")
	if _, err := runRuntime(p, opts); err == nil {
		t.Fatal("a bad line with no dlq must stop the route")
	}

	for _, tc := range []struct {
		name    string
		change  func()
		wantErr string
	}{
		{"replaced", func() { os.Remove(b); writeNumbered(t, b, 100, 6) }, "does not fit the file"},
		{"deleted", func() { os.Remove(b) }, "is gone"},
	} {
		tc.change()
		_, err := runRuntime(p, opts)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "mqbc state reset") {
			t.Fatalf("%s: got %v, want a refusal saying %q and how to reset", tc.name, err, tc.wantErr)
		}
	}
	// Reset (the state removed) with the file mended: every line once.
	os.WriteFile(b, []byte(strings.Replace(bad, "broken", "4}", 1)), 0o644)
	os.RemoveAll(filepath.Join(d, "state"))
	os.Remove(filepath.Join(d, "out.jsonl"))
	runtest.RunIn(t, d, p)
	want := []string{"logs/a.log:0=0", "logs/a.log:1=1", "logs/b.log:0=2", "logs/b.log:1=3", "logs/b.log:2=4", "logs/b.log:3=5"}
	if got := srcOf(t, filepath.Join(d, "out.jsonl")); !slices.Equal(got, want) {
		t.Errorf("after the reset\n%q\nwant\n%q", got, want)
	}
}

// TestGlobResumesInsideFile: stopped inside a file that is still the same
// file (the bad line mended without changing its inode or first bytes),
// a run resumes at the committed byte and numbers lines on from there.
func TestGlobResumesInsideFile(t *testing.T) {
	d := t.TempDir()
	logs := filepath.Join(d, "logs")
	os.MkdirAll(logs, 0o755)
	writeNumbered(t, filepath.Join(logs, "a.log"), 0, 2)
	// b.log: 200 good lines (more than the identity's fingerprint
	// covers), a bad one, one more.
	b := filepath.Join(logs, "b.log")
	var lines strings.Builder
	for i := 2; i < 202; i++ {
		fmt.Fprintf(&lines, `{"n": %d}`+"\n", i)
	}
	bad := lines.String() + `{"n": broken` + "\n" + `{"n": 203}` + "\n"
	os.WriteFile(b, []byte(bad), 0o644)
	writeNumbered(t, filepath.Join(logs, "c.log"), 204, 1)
	p := globRoute(t, "logs/*.log", "consume", "out.jsonl", filepath.Join(d, "state"))
	p.Routes[0].BatchSize = 1
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = d, filepath.Join(d, "state")
	if _, err := runRuntime(p, opts); err == nil {
		t.Fatal("a bad line with no dlq must stop the route")
	}
	f, err := os.OpenFile(b, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("202}  "), int64(strings.Index(bad, "broken")))
	f.Close()
	runtest.RunIn(t, d, p)
	want := []string{"logs/a.log:0=0", "logs/a.log:1=1"}
	for i := 2; i < 204; i++ {
		want = append(want, fmt.Sprintf("logs/b.log:%d=%d", i-2, i))
	}
	want = append(want, "logs/c.log:0=204")
	// Records after the bad one may have been written before the route
	// stopped (at-least-once into a write_time file): each is there, and
	// nothing else, numbered in its own file.
	got := srcOf(t, filepath.Join(d, "out.jsonl"))
	if set := slices.Compact(slices.Sorted(slices.Values(got))); !slices.Equal(set, slices.Sorted(slices.Values(want))) {
		t.Errorf("after resuming\n%q\nwant each of\n%q", got, want)
	}
}

// TestGlobSubscribe: subscribe starts at the end of the last file,
// follows it, and reads a file that appears later (sorting after it) from
// its start once the current one has stopped growing; a file that sorts
// before the current one is not read.
func TestGlobSubscribe(t *testing.T) {
	d := t.TempDir()
	logs := filepath.Join(d, "logs")
	os.MkdirAll(logs, 0o755)
	writeNumbered(t, filepath.Join(logs, "1.log"), 0, 2)
	writeNumbered(t, filepath.Join(logs, "2.log"), 2, 2)
	out := filepath.Join(d, "out.jsonl")
	p := globRoute(t, "logs/*.log", "subscribe", out, filepath.Join(d, "state"))
	opts := runtest.Options()
	opts.BaseDir, opts.StateDir = d, filepath.Join(d, "state")
	r := startRun(context.Background(), p, opts)
	time.Sleep(500 * time.Millisecond)
	appendFile(t, filepath.Join(logs, "2.log"), `{"n": 4}`+"\n")
	waitLines(t, out, 1)
	writeNumbered(t, filepath.Join(logs, "0.log"), 90, 1) // sorts before: not read
	writeNumbered(t, filepath.Join(logs, "3.log"), 5, 2)
	waitLines(t, out, 3)
	r.Stop(t)
	want := []string{"logs/2.log:0=4", "logs/3.log:0=5", "logs/3.log:1=6"}
	if got := srcOf(t, out); !slices.Equal(got, want) {
		t.Errorf("followed\n%q\nwant\n%q", got, want)
	}
}

func TestGlobCheckpointEncoding(t *testing.T) {
	for _, gp := range []globPos{
		{},
		{first: 7, done: true, file: encodeFileSource("/a b/x|y.log", fileIdentity{Dev: 1, Ino: 2, HeadLen: 3, Head: "ab", Parts: "cd"})},
		{first: 1 << 40, file: "/plain path"},
		{first: 3, done: true, listed: 1767225600123456789, file: "/logs/with listed=5 file=x.log"},
	} {
		src := encodeGlobSource("/logs/*.log", gp)
		pattern, got, ok := decodeGlobSource(src)
		if !ok || pattern != "/logs/*.log" || got != gp {
			t.Errorf("%q decoded to %q %+v %v, want %+v", src, pattern, got, ok, gp)
		}
	}
	if _, _, ok := decodeGlobSource("/logs/a.log"); ok {
		t.Error("a single file's checkpoint decoded as a glob's")
	}
}

func runRuntime(p plan.Plan, opts runtime.Options) (runtime.Stats, error) {
	return runtime.Run(context.Background(), p, opts)
}
