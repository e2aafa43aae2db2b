package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLSPOverStdio starts the real binary as `mqbc lsp` and speaks
// Content-Length framed JSON-RPC to it on stdin/stdout, as VS Code does:
// initialize, open a file with an error, read the published diagnostic,
// hover a route for its verdict, shut down and exit with code 0.
func TestLSPOverStdio(t *testing.T) {
	cmd := exec.Command(mqbcBin, "lsp", "--stdio")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	msgs := make(chan map[string]any, 16)
	go func() {
		r := bufio.NewReader(stdout)
		for {
			m, err := readLSPFrame(r)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	send := func(m map[string]any) {
		m["jsonrpc"] = "2.0"
		b, _ := json.Marshal(m)
		fmt.Fprintf(stdin, "Content-Length: %d\r\n\r\n%s", len(b), b)
	}
	next := func(want func(map[string]any) bool) map[string]any {
		t.Helper()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("server closed stdout; stderr: %s", stderr.String())
				}
				if want(m) {
					return m
				}
			case <-time.After(20 * time.Second):
				t.Fatal("timed out waiting for mqbc lsp")
			}
		}
	}
	reply := func(id float64) func(map[string]any) bool {
		return func(m map[string]any) bool { return m["id"] == id }
	}

	send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{"processId": nil, "rootUri": nil, "capabilities": map[string]any{}}})
	init := next(reply(1))
	if caps, _ := init["result"].(map[string]any)["capabilities"].(map[string]any); caps["hoverProvider"] != true {
		t.Errorf("initialize result: %v", init)
	}
	send(map[string]any{"method": "initialized", "params": map[string]any{}})

	const uri = "file:///tmp/orders.mqb"
	src := strings.Replace(goodSrc, "from file {", "from fille {", 1) + badSrc
	send(map[string]any{"method": "textDocument/didOpen", "params": map[string]any{
		"textDocument": map[string]any{"uri": uri, "languageId": "mqb", "version": 1, "text": src},
	}})
	pub := next(func(m map[string]any) bool { return m["method"] == "textDocument/publishDiagnostics" })
	params := pub["params"].(map[string]any)
	var codes []string
	for _, d := range params["diagnostics"].([]any) {
		d := d.(map[string]any)
		codes = append(codes, d["code"].(string))
		if strings.Contains(d["message"].(string), `"fille"`) {
			start := d["range"].(map[string]any)["start"].(map[string]any)
			if start["line"] != 2.0 || start["character"] != 7.0 {
				t.Errorf("E012 at %v, want line 2 character 7 (0-based)", start)
			}
		}
	}
	if params["uri"] != uri || strings.Join(codes, ",") != "E012,E012" {
		t.Errorf("diagnostics for %v: %v, want E012 (fille) and E012 (sqll)", params["uri"], codes)
	}

	// Fix the first route and hover over its name: the verdict.
	send(map[string]any{"method": "textDocument/didChange", "params": map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": 2},
		"contentChanges": []any{map[string]any{"text": goodSrc}},
	}})
	pub = next(func(m map[string]any) bool { return m["method"] == "textDocument/publishDiagnostics" })
	if ds := pub["params"].(map[string]any)["diagnostics"].([]any); len(ds) != 0 {
		t.Errorf("diagnostics after the fix: %v", ds)
	}
	send(map[string]any{"id": 2, "method": "textDocument/hover", "params": map[string]any{
		"textDocument": map[string]any{"uri": uri}, "position": map[string]any{"line": 0, "character": 8},
	}})
	hover := next(reply(2))
	value, _ := hover["result"].(map[string]any)["contents"].(map[string]any)["value"].(string)
	if !strings.Contains(value, "effectively-once") || !strings.Contains(value, "identity: id payload.order_id (stable)") {
		t.Errorf("hover = %q, want the verdict and its reasons", value)
	}

	send(map[string]any{"id": 3, "method": "shutdown"})
	next(reply(3))
	send(map[string]any{"method": "exit"})
	stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("mqbc lsp exited with %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mqbc lsp did not exit")
	}
}

func readLSPFrame(r *bufio.Reader) (map[string]any, error) {
	n := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if n < 0 {
		return nil, fmt.Errorf("frame without Content-Length")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(body, &m)
}

// TestLSPFramingErrorExits: the real binary fed a frame it cannot read
// past (here an oversized header) says so on stderr and exits 1; a stream
// that ends between frames (the editor went away) exits 0.
func TestLSPFramingErrorExits(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		code        int
		stderr      string
	}{
		{"oversized header", "X-Pad: " + strings.Repeat("a", 10000) + "\r\n\r\n", 1, "mqbc lsp: reading from the client: LSP framing error: header longer than 8192 bytes"},
		{"bad length", "Content-Length: lots\r\n\r\n", 1, `mqbc lsp: reading from the client: LSP framing error: Content-Length "lots" is not a byte count`},
		{"client gone", "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(mqbcBin, "lsp")
			cmd.Stdin = strings.NewReader(tc.input)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("mqbc lsp did not exit")
			}
			if got := cmd.ProcessState.ExitCode(); got != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", got, stderr.String(), tc.code, tc.stderr)
			}
		})
	}
}
