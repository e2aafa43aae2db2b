package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunStdinToStdout is `cat in.jsonl | mqbc run p.mqb > out.jsonl`:
// stdout holds exactly the records, in order; the verdicts and counts go
// to stderr (the records own stdout); a malformed and an over-long line go
// to the DLQ with their reasons; the verdict says at-most-once (a pipe
// cannot be read again); a byte-order mark starting the input is not part
// of the first record.
func TestRunStdinToStdout(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "p.mqb", `route pipe {
  from stdin { max_record_bytes = 200 }
  dlq { to file { path = "dlq.jsonl" } }
  to stdout {}
}
`)
	var in, want bytes.Buffer
	in.WriteString("\xef\xbb\xbf")
	for i := range 5000 {
		switch i {
		case 1234:
			in.WriteString("{not json\n")
		case 4321:
			fmt.Fprintf(&in, "{\"id\":%d,\"pad\":%q}\n", i, strings.Repeat("x", 300))
		default:
			line := fmt.Sprintf("{\"id\":%d,\"body\":\"line %d\"}", i, i)
			end := "\n"
			if i%7 == 0 {
				end = "\r\n" // a CRLF line loses its \r as a file source's does
			}
			in.WriteString(line + end)
			want.WriteString(line + "\n")
		}
	}
	in.WriteString(`{"id":"last, no newline"}`)
	want.WriteString(`{"id":"last, no newline"}` + "\n")

	cmd := exec.Command(mqbcBin, "run", "p.mqb")
	cmd.Dir = dir
	cmd.Stdin = &in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("mqbc run: %v\nstderr:\n%s", err, errb.String())
	}
	if out.String() != want.String() {
		t.Errorf("stdout is not the records in order: %d bytes, want %d\nstdout begins:\n%.300s", out.Len(), want.Len(), out.String())
	}
	for _, s := range []string{"pipe: at-most-once", "stdin cannot be read again", "pipe: in 5001, out 4999, deduplicated 0, filtered 0, dead-lettered 2, errors 0"} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, errb.String())
		}
	}
	dlq, err := os.ReadFile(filepath.Join(dir, "dlq.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(dlq)), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], "invalid JSON") || !strings.Contains(lines[1], "exceeds max_record_bytes = 200") {
		t.Errorf("DLQ:\n%s", dlq)
	}
}

// TestStdinDrainSaysInterrupted: SIGTERM while stdin is still open is not
// a clean end — the input after it is never read, and stdin cannot be
// read again — so the run says so and exits 3, never 0.
func TestStdinDrainSaysInterrupted(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "p.mqb", "route pipe {\n  from stdin {}\n  to file { path = \"out.jsonl\" }\n}\n")
	cmd := exec.Command(mqbcBin, "run", "p.mqb")
	cmd.Dir = dir
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, `{"id":1}`)
	if !waitUntil(30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "out.jsonl"))
		return len(b) > 0
	}) {
		cmd.Process.Kill()
		t.Fatalf("the first record never landed:\n%s", errb.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	in.Close()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupted || !strings.Contains(out.String(), "pipe: interrupted after record 1") || !strings.Contains(out.String(), "cannot be read again") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
}
