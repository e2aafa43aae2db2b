package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mqb-dev/mqb/runtime"

	"github.com/mqb-dev/mqb/plan"
)

func openTestFileSink(t *testing.T, path string) (*fileSink, error) {
	t.Helper()
	n := &plan.Node{ID: "n0", Role: plan.RoleSink, Kind: "file", Attrs: map[string]plan.Value{"path": strV(path)}}
	s, err := runtime.BuildSink(context.Background(), "r", "json", n, runtime.Options{})
	if err != nil {
		return nil, err
	}
	return s.(*fileSink), nil
}

// sinkWrite writes lines through a file sink opened on path, as a run does.
func sinkWrite(t *testing.T, path string, lines ...string) {
	t.Helper()
	s, err := openTestFileSink(t, path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*runtime.Record
	for _, l := range lines {
		recs = append(recs, &runtime.Record{Payload: []byte(l)})
	}
	if err := s.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDropTornTail: a file sink reopened after a crash mid-write cuts the
// unterminated fragment mqb left past the length it recorded, so the next
// record is not glued onto it; whole lines are kept. Bytes mqb did not
// write are never cut: a foreign file is appended to untouched, on a line
// of its own.
func TestDropTornTail(t *testing.T) {
	tests := []struct {
		name    string
		foreign string   // the file before mqb opens it (no record of mqb's)
		wrote   []string // lines mqb writes
		torn    string   // appended after mqb's writes: what a crash left
		want    string   // after mqb opens the file again
	}{
		{name: "empty", want: ""},
		{name: "whole lines", wrote: []string{"a", "b"}, want: "a\nb\n"},
		{name: "torn after mqb's lines", wrote: []string{"a", "b"}, torn: `{"torn`, want: "a\nb\n"},
		{name: "torn first write", torn: `{"torn`, want: ""},
		{name: "foreign whole lines", foreign: "x\ny\n", wrote: []string{"a"}, want: "x\ny\na\n"},
		{name: "foreign unterminated", foreign: "x\ny", wrote: []string{"a"}, want: "x\ny\na\n"},
		{name: "foreign unterminated only", foreign: `{"not mqb's`, want: "{\"not mqb's\n"},
		{name: "foreign, then torn", foreign: "x\ny", wrote: []string{"a"}, torn: "{\"to", want: "x\ny\na\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			if tt.foreign != "" {
				if err := os.WriteFile(path, []byte(tt.foreign), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			sinkWrite(t, path, tt.wrote...)
			appendFile(t, path, tt.torn)
			s, err := openTestFileSink(t, path)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			got, _ := os.ReadFile(path)
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestFileSinkForeignTail: a file whose sidecar is for another file (the
// output was replaced by a foreign one of the same name) is not cut.
func TestFileSinkForeignTail(t *testing.T) {
	d := t.TempDir()
	path := filepath.Join(d, "out.jsonl")
	sinkWrite(t, path, "a", "b")
	os.Remove(path)
	if err := os.WriteFile(path, []byte("someone else's\nhalf"), 0o600); err != nil {
		t.Fatal(err)
	}
	sinkWrite(t, path, "c")
	if got, _ := os.ReadFile(path); string(got) != "someone else's\nhalf\nc\n" {
		t.Errorf("got %q", got)
	}
}

// TestFileSinkRefusesSymlink: a sink or DLQ path that is a symbolic link
// is refused, and the link's target is untouched (before, an unterminated
// target was cut and then appended to).
func TestFileSinkRefusesSymlink(t *testing.T) {
	d := t.TempDir()
	target := filepath.Join(d, "passwd")
	const content = "root:x:0:0\nno newline"
	if err := os.WriteFile(target, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, which := range []string{"sink", "dlq"} {
		t.Run(which, func(t *testing.T) {
			dd := t.TempDir()
			in, out, dlq := filepath.Join(dd, "in.jsonl"), filepath.Join(dd, "out.jsonl"), filepath.Join(dd, "dlq.jsonl")
			if err := os.WriteFile(in, []byte(`{"a": 1}`+"\n"+`not json`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			link := out
			if which == "dlq" {
				link = dlq
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			runRefused(t, fileRoute("r", in, out, dlq, filepath.Join(dd, "state")), []string{link, "symbolic link"})
			if got, _ := os.ReadFile(target); string(got) != content {
				t.Errorf("the link's target is now %q", got)
			}
			if _, err := os.Stat(sidecarPath(target)); err == nil {
				t.Errorf("a sidecar was written beside the target")
			}
		})
	}
	// A part file's temporary name taken by a link: the link is replaced,
	// never written through.
	dd := t.TempDir()
	parts := filepath.Join(dd, "parts")
	os.MkdirAll(parts, 0o700)
	tmp := filepath.Join(parts, ".x.tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := writeFileSync(tmp, []byte("part\n")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != content {
		t.Errorf("the link's target is now %q", got)
	}
	if got, _ := os.ReadFile(tmp); !strings.HasPrefix(string(got), "part") {
		t.Errorf("the temporary file holds %q", got)
	}
}
