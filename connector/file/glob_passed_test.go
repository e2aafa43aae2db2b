package file

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mqb-dev/mqb/internal/runtest"
	"github.com/mqb-dev/mqb/runtime/checkpoint"
)

// TestGlobRefusesFileBehindIt: a consume route over logs/*.log read b.log;
// then a.log (sorting before it) and c.log arrived. A resumed route
// skips the files sorting before its checkpoint's, so it once read c.log
// and never a.log, exiting 0. Now it refuses, naming a.log and the ways
// on, and reads nothing; a.log renamed to sort after b.log is read with
// c.log by the next run. A checkpoint written before the listing time was
// kept resumes as before.
func TestGlobRefusesFileBehindIt(t *testing.T) {
	d := t.TempDir()
	logs := filepath.Join(d, "logs")
	os.MkdirAll(logs, 0o755)
	writeNumbered(t, filepath.Join(logs, "b.log"), 10, 2)
	p := globRoute(t, "logs/*.log", "consume", "out.jsonl", filepath.Join(d, "state"))
	runtest.RunIn(t, d, p)

	writeNumbered(t, filepath.Join(logs, "a.log"), 0, 2)
	writeNumbered(t, filepath.Join(logs, "c.log"), 20, 1)
	opts := runtest.Options()
	opts.BaseDir = d
	_, err := runRuntime(p, opts)
	if err == nil {
		t.Fatal("the route resumed past a.log, which appeared behind its checkpoint")
	}
	for _, want := range []string{"logs/a.log sorts before logs/b.log, which the route has read past", "give it a name that sorts after logs/b.log", "mqbc state reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if got := srcOf(t, filepath.Join(d, "out.jsonl")); len(got) != 2 {
		t.Fatalf("the refused run wrote: %q", got)
	}

	if err := os.Rename(filepath.Join(logs, "a.log"), filepath.Join(logs, "d.log")); err != nil {
		t.Fatal(err)
	}
	runtest.RunIn(t, d, p)
	want := []string{"logs/b.log:0=10", "logs/b.log:1=11", "logs/c.log:0=20", "logs/d.log:0=0", "logs/d.log:1=1"}
	if got := srcOf(t, filepath.Join(d, "out.jsonl")); !slices.Equal(got, want) {
		t.Errorf("after renaming a.log\n%q\nwant\n%q", got, want)
	}

	// A file appended to after the route had passed it is refused too.
	f, err := os.OpenFile(filepath.Join(logs, "b.log"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"n": 12}` + "\n")
	f.Close()
	if _, err := runRuntime(p, opts); err == nil || !strings.Contains(err.Error(), "logs/b.log sorts before logs/d.log") {
		t.Fatalf("b.log appended to after it was read: %v, want a refusal", err)
	}
}

// TestGlobFileAppearsWhileReading: in one run, a file appearing after
// the listing that sorts after the file being read is read in its place;
// one sorting before it stops the route with the reason, never skipped.
func TestGlobFileAppearsWhileReading(t *testing.T) {
	d := t.TempDir()
	writeNumbered(t, filepath.Join(d, "b.log"), 10, 2)
	g := &globSource{
		tmpl:    &fileSource{route: "load", log: slog.New(slog.DiscardHandler), path: filepath.Join(d, "*.log"), mode: modeConsume, format: "json", maxRecord: 1 << 20},
		pattern: filepath.Join(d, "*.log"), written: filepath.Join(d, "*.log"),
		seen: map[[2]uint64]bool{}, known: map[string]bool{},
	}
	ctx := context.Background()
	if err := g.Open(ctx, checkpoint.Position{}, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var got []string
	next := func() error {
		b, _, err := g.Next(ctx, 1)
		if err != nil {
			return err
		}
		for _, r := range b.Records() {
			got = append(got, string(r.Payload))
		}
		return nil
	}
	if err := next(); err != nil { // b.log's first line
		t.Fatal(err)
	}
	writeNumbered(t, filepath.Join(d, "c.log"), 20, 1)
	for len(got) < 3 {
		if err := next(); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{`{"n": 10}`, `{"n": 11}`, `{"n": 20}`}; !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q (c.log read after b.log)", got, want)
	}
	writeNumbered(t, filepath.Join(d, "a.log"), 0, 1)
	time.Sleep(relistEvery)
	var err error
	for range 10 {
		if err = next(); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "a.log sorts before") || !strings.Contains(err.Error(), "c.log") {
		t.Fatalf("a.log appeared behind the files read: %v, want the route stopped", err)
	}
}
