package lsp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer collects what the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveInput runs Serve over input (the client's whole stream, then EOF)
// and returns Serve's error, what the server wrote and what it logged.
func serveInput(t *testing.T, input io.Reader) (out, logged string, err error) {
	t.Helper()
	var w, logw lockedBuffer
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), pipeRWC{Reader: input, Writer: &w}, &logw) }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
	}
	return w.String(), logw.String(), err
}

func frame(body string) string {
	return "Content-Length: " + formatInt(len(body)) + "\r\n\r\n" + body
}

func formatInt(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

const initializeCall = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{}}}`

// TestFramingErrorsEndTheSession: a frame the server cannot read past
// ends Serve with an error naming what was wrong (mqbc lsp then exits 1),
// after answering what came before it; nothing is allocated for a
// Content-Length over the limit, and a header is read no further than
// 8 KiB.
func TestFramingErrorsEndTheSession(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"bad Content-Length", "Content-Length: ten\r\n\r\n{}", `Content-Length "ten" is not a byte count`},
		{"negative Content-Length", "Content-Length: -5\r\n\r\n", `Content-Length "-5" is not a byte count`},
		{"missing Content-Length", "Content-Type: application/vscode-jsonrpc\r\n\r\n{}", "a header without Content-Length"},
		{"line without a colon", "hello there\r\n\r\n", `header line "hello there" has no colon`},
		{"body over the limit", "Content-Length: 9000000000\r\n\r\n", "Content-Length 9000000000 is over the 67108864-byte limit"},
		{"header over 8 KiB", "X-Pad: " + strings.Repeat("a", 9000) + "\r\nContent-Length: 2\r\n\r\n{}", "header longer than 8192 bytes"},
		{"header without end", "Content-Length: 2\r\nX: " + strings.Repeat("b", 100), "the stream ended inside a header"},
		{"body cut short", "Content-Length: 100\r\n\r\n{\"jsonrpc\":", "the stream ended 11 bytes into a 100-byte message"},
		{"two lengths", "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "two Content-Length headers (2 and 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := serveInput(t, strings.NewReader(frame(initializeCall)+tc.input))
			if !errors.Is(err, errFraming) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve = %v, want a framing error saying %q", err, tc.want)
			}
			if !strings.Contains(out, `"id":1`) || !strings.Contains(out, `"capabilities"`) {
				t.Errorf("the initialize before the bad frame was not answered: %q", out)
			}
		})
	}
}

// TestFramingRecovers: a well-framed body that is not a JSON-RPC message
// is logged and skipped, the next message is answered; header names are
// case-insensitive and Content-Type is ignored; the stream ending between
// frames is the client leaving, not an error.
func TestFramingRecovers(t *testing.T) {
	input := frame("this is not json") + frame(`{"jsonrpc":"2.0"}`) +
		"content-length: " + formatInt(len(initializeCall)) + "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + initializeCall
	out, logged, err := serveInput(t, strings.NewReader(input))
	if err != nil {
		t.Fatalf("Serve = %v, want nil (the client left between frames)", err)
	}
	if !strings.Contains(out, `"id":1`) || !strings.Contains(out, `"capabilities"`) {
		t.Errorf("initialize after the skipped messages was not answered: %q", out)
	}
	if strings.Count(logged, "skipped a ") != 2 || !strings.Contains(logged, "skipped a 16-byte message that is not JSON-RPC 2.0") {
		t.Errorf("log %q: want both skipped messages logged", logged)
	}
}
