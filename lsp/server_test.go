package lsp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/mqb-dev/mqb/lang"
)

// The tests drive the real server over an in-memory pipe pair with real
// JSON-RPC 2.0 messages in Content-Length frames, as an editor does.

// message is any JSON-RPC message the server sends.
type message struct {
	ID     *int            `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type client struct {
	t      *testing.T
	w      io.WriteCloser
	in     chan message
	nextID int
	done   chan error // Serve's result
	// notes holds notifications that arrived while waiting for a reply.
	notes []message
}

type pipeRWC struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p pipeRWC) Close() error {
	for _, c := range p.closers {
		c.Close()
	}
	return nil
}

func startServer(t *testing.T) *client {
	t.Helper()
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	c := &client{t: t, w: cw, in: make(chan message, 64), done: make(chan error, 1)}
	go func() {
		c.done <- Serve(context.Background(), pipeRWC{sr, sw, []io.Closer{sr, sw}}, nil)
	}()
	go func() {
		r := bufio.NewReader(cr)
		for {
			m, err := readFrame(r)
			if err != nil {
				close(c.in)
				return
			}
			c.in <- m
		}
	}()
	t.Cleanup(func() { cw.Close(); cr.Close() })
	return c
}

// readFrame reads one Content-Length framed message.
func readFrame(r *bufio.Reader) (message, error) {
	n := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return message{}, err
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
		return message{}, fmt.Errorf("frame without Content-Length")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return message{}, err
	}
	var m message
	err := json.Unmarshal(body, &m)
	return m, err
}

func (c *client) send(v any) {
	c.t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c.w, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	c.send(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// call sends a request and decodes its result into out (if not nil).
func (c *client) call(method string, params, out any) {
	c.t.Helper()
	c.nextID++
	id := c.nextID
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	c.send(req)
	for {
		m := c.recv()
		if m.ID == nil {
			c.notes = append(c.notes, m)
			continue
		}
		if *m.ID != id {
			c.t.Fatalf("reply to %d while waiting for %d", *m.ID, id)
		}
		if m.Error != nil {
			c.t.Fatalf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				c.t.Fatalf("%s: decode %s: %v", method, m.Result, err)
			}
		}
		return
	}
}

func (c *client) recv() message {
	c.t.Helper()
	select {
	case m, ok := <-c.in:
		if !ok {
			c.t.Fatal("server closed the stream")
		}
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("timed out waiting for the server")
	}
	panic("unreachable")
}

// diagnostics waits for the next publishDiagnostics for uri.
func (c *client) diagnostics(uri string) []lspDiag {
	c.t.Helper()
	for {
		var m message
		if len(c.notes) > 0 {
			m, c.notes = c.notes[0], c.notes[1:]
		} else {
			m = c.recv()
		}
		if m.Method != "textDocument/publishDiagnostics" {
			continue
		}
		var p struct {
			URI         string    `json:"uri"`
			Diagnostics []lspDiag `json:"diagnostics"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			c.t.Fatal(err)
		}
		if p.URI == uri {
			return p.Diagnostics
		}
	}
}

type lspPos struct {
	Line      int `json:"line"`
	Character int `json:"character"`
}

type lspRange struct {
	Start lspPos `json:"start"`
	End   lspPos `json:"end"`
}

type lspDiag struct {
	Range    lspRange `json:"range"`
	Severity int      `json:"severity"`
	Code     string   `json:"code"`
	Message  string   `json:"message"`
}

func (c *client) initialize() {
	c.t.Helper()
	var res struct {
		Capabilities map[string]any `json:"capabilities"`
	}
	c.call("initialize", map[string]any{"processId": nil, "rootUri": nil, "capabilities": map[string]any{}}, &res)
	for _, cap := range []string{"hoverProvider", "completionProvider", "definitionProvider", "documentFormattingProvider", "textDocumentSync"} {
		if res.Capabilities[cap] == nil {
			c.t.Errorf("initialize: capability %s missing: %v", cap, res.Capabilities)
		}
	}
	c.notify("initialized", map[string]any{})
}

func (c *client) open(uri, src string) {
	c.t.Helper()
	c.notify("textDocument/didOpen", map[string]any{"textDocument": map[string]any{
		"uri": uri, "languageId": "mqb", "version": 1, "text": src,
	}})
}

func (c *client) change(uri string, version int, src string) {
	c.t.Helper()
	c.notify("textDocument/didChange", map[string]any{
		"textDocument":   map[string]any{"uri": uri, "version": version},
		"contentChanges": []any{map[string]any{"text": src}},
	})
}

func (c *client) shutdown() {
	c.t.Helper()
	c.call("shutdown", nil, nil)
	c.notify("exit", nil)
	select {
	case err := <-c.done:
		if err != nil {
			c.t.Errorf("Serve after exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		c.t.Fatal("Serve did not return after exit")
	}
}

func textDoc(uri string, p lspPos) map[string]any {
	return map[string]any{"textDocument": map[string]any{"uri": uri}, "position": p}
}

// at returns the LSP position of the first occurrence of marker in src
// (plus delta bytes), computed independently of the server: UTF-16 units.
func at(t *testing.T, src, marker string, delta int) lspPos {
	t.Helper()
	i := strings.Index(src, marker)
	if i < 0 {
		t.Fatalf("marker %q not in source", marker)
	}
	i += delta
	line := strings.Count(src[:i], "\n")
	lineStart := strings.LastIndex(src[:i], "\n") + 1
	return lspPos{Line: line, Character: len(utf16.Encode([]rune(src[lineStart:i])))}
}

const goodSrc = `route orders_to_db {
  guarantee effectively_once
  from file { path = "orders.jsonl" }
  id payload.order_id
  dedup { key = meta["mqb.id"], store = "pebble://state/dedup", ttl = 1h }
  to sql {
    url          = "sqlite://orders.db"
    insert_query = """
      INSERT INTO orders (id, body)
      VALUES (${meta["mqb.id"]}, ${payload.body})
      ON CONFLICT (id) DO NOTHING
    """
  }
}
`

// badSrc has an unknown attribute after non-ASCII text on its line: the
// range must count UTF-16 units (é is one, the emoji two), not bytes.
const badSrc = `route r {
  from file { path = "é😀.jsonl", pth = "x" }
  to file { path = "out.jsonl" }
}
`

func TestDiagnosticsPublishedAndCleared(t *testing.T) {
	c := startServer(t)
	c.initialize()
	const uri = "file:///work/bad.mqb"
	c.open(uri, badSrc)
	ds := c.diagnostics(uri)
	if len(ds) != 1 {
		t.Fatalf("diagnostics = %+v, want one E013", ds)
	}
	d := ds[0]
	start := at(t, badSrc, "pth", 0)
	want := lspRange{Start: start, End: lspPos{Line: start.Line, Character: start.Character + 3}}
	if d.Code != "E013" || d.Severity != 1 || d.Range != want || !strings.Contains(d.Message, "pth") {
		t.Errorf("diagnostic = %+v, want E013 error at %+v", d, want)
	}
	if start.Character != 34 {
		t.Errorf("test premise: pth at UTF-16 column %d, want 34 (bytes would say 37)", start.Character)
	}

	// Hovering the mistake explains its code.
	var h struct {
		Contents struct{ Value string } `json:"contents"`
	}
	c.call("textDocument/hover", textDoc(uri, at(t, badSrc, "pth", 1)), &h)
	if !strings.Contains(h.Contents.Value, "**E013** unknown attribute") {
		t.Errorf("hover on the mistake = %q, want E013 explained", h.Contents.Value)
	}

	// The route's verdict says it is provisional.
	c.call("textDocument/hover", textDoc(uri, at(t, badSrc, "r {", 0)), &h)
	if !strings.Contains(h.Contents.Value, "**route r**") || !strings.Contains(h.Contents.Value, "has 1 error(s)") {
		t.Errorf("hover on a route with an error = %q", h.Contents.Value)
	}

	// Fixing the mistake clears the diagnostics.
	c.change(uri, 2, strings.Replace(badSrc, `pth = "x"`, "mode = tail", 1))
	if ds := c.diagnostics(uri); len(ds) != 1 || ds[0].Code != "E017" {
		t.Errorf("after the change: %+v, want one E017 (tail is no mode)", ds)
	}
	c.change(uri, 3, strings.Replace(badSrc, `, pth = "x"`, "", 1))
	if ds := c.diagnostics(uri); len(ds) != 0 {
		t.Errorf("after the fix: %+v, want none", ds)
	}

	// A syntax error still leaves the other routes checked (warnings and
	// errors of the partial AST).
	broken := "route a {\n  from file { path = \"a\"\n\nroute b {\n  from file { path = \"b\" }\n  to sqll { url = \"sqlite://x.db\" }\n}\n"
	c.change(uri, 4, broken)
	codes := map[string]bool{}
	for _, d := range c.diagnostics(uri) {
		codes[d.Code] = true
	}
	if !codes["E001"] || !codes["E012"] {
		t.Errorf("broken file: codes %v, want E001 (route a) and E012 (route b)", codes)
	}
	// The route the parser dropped has no verdict, and says so.
	h.Contents.Value = ""
	c.call("textDocument/hover", textDoc(uri, at(t, broken, "route a", 6)), &h)
	if !strings.Contains(h.Contents.Value, "No verdict") {
		t.Errorf("hover on a route that does not parse = %q", h.Contents.Value)
	}
	c.shutdown()
}

func TestHover(t *testing.T) {
	c := startServer(t)
	c.initialize()
	const uri = "file:///work/good.mqb"
	c.open(uri, goodSrc)
	if ds := c.diagnostics(uri); len(ds) != 0 {
		t.Fatalf("good source has diagnostics: %+v", ds)
	}
	tests := []struct {
		name   string
		pos    lspPos
		want   []string // substrings of the markdown; nil: no hover
		absent []string
	}{
		{"route name", at(t, goodSrc, "orders_to_db", 3), []string{"effectively-once", "identity: id payload.order_id (stable)", "ON CONFLICT (id) DO NOTHING"}, nil},
		{"route keyword", at(t, goodSrc, "route", 0), []string{"effectively-once"}, nil},
		{"guarantee line", at(t, goodSrc, "effectively_once", 2), []string{"**route orders_to_db**: effectively-once"}, nil},
		{"attribute", at(t, goodSrc, "ttl", 1), []string{"**ttl**: duration", "How long a processed key is remembered", "Default: `24h`"}, []string{"(required)"}},
		{"required attribute", at(t, goodSrc, "path", 0), []string{"**path**: string (required)"}, nil},
		{"kind", at(t, goodSrc, "file {", 0), []string{"**file** (endpoint kind: source, sink)", "UUIDv7"}, nil},
		{"sink kind", at(t, goodSrc, "sql {", 2), []string{"**sql**", "insert_query"}, nil},
		{"step", at(t, goodSrc, "dedup", 0), []string{"**dedup** (step, input-only side)"}, nil},
		{"expr step", at(t, goodSrc, "id payload", 0), []string{"**id** (step"}, nil},
		{"enum value", at(t, goodSrc, "effectively_once", 0), []string{"effectively-once"}, nil},
		{"string value", at(t, goodSrc, "orders.jsonl", 0), nil, nil},
		{"expression", at(t, goodSrc, "payload.order_id", 0), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h *struct {
				Contents struct {
					Kind  string `json:"kind"`
					Value string `json:"value"`
				} `json:"contents"`
			}
			c.call("textDocument/hover", textDoc(uri, tt.pos), &h)
			if tt.want == nil {
				if h != nil {
					t.Errorf("hover = %q, want none", h.Contents.Value)
				}
				return
			}
			if h == nil {
				t.Fatalf("no hover, want %q", tt.want)
			}
			if h.Contents.Kind != "markdown" {
				t.Errorf("kind = %q", h.Contents.Kind)
			}
			for _, w := range tt.want {
				if !strings.Contains(h.Contents.Value, w) {
					t.Errorf("hover %q lacks %q", h.Contents.Value, w)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(h.Contents.Value, a) {
					t.Errorf("hover %q has %q", h.Contents.Value, a)
				}
			}
		})
	}
	c.shutdown()
}

func TestCompletion(t *testing.T) {
	c := startServer(t)
	c.initialize()
	tests := []struct {
		name   string
		src    string // | marks the cursor
		want   []string
		absent []string
	}{
		{"attributes of an empty block", "route r {\n  from file { | }\n}\n", []string{"path", "mode", "format", "name_by"}, []string{"url", "dedup"}},
		{"attributes not yet set", "route r {\n  from file { path = \"a\", | }\n}\n", []string{"mode"}, []string{"path"}},
		{"attribute being typed", "route r {\n  from file {\n    path = \"a\"\n    mo|\n  }\n}\n", []string{"mode"}, []string{"path"}},
		{"attribute set below the cursor", "route r {\n  to sql {\n    |\n    url = \"sqlite://a.db\"\n  }\n}\n", []string{"insert_query", "table"}, []string{"url"}},
		{"source kinds after from", "route r {\n  from |\n}\n", []string{"file", "kafka", "postgres_cdc", "ref"}, []string{"switch", "http"}},
		{"sink kinds after to", "route r {\n  from file { path = \"a\" }\n  to |\n}\n", []string{"sql", "switch", "http"}, []string{"postgres_cdc"}},
		{"kind being typed", "route r {\n  from file { path = \"a\" }\n  to cl|\n}\n", []string{"clickhouse"}, nil},
		{"kinds after call", "route r {\n  to request {\n    call |\n  }\n}\n", []string{"http", "sql"}, nil},
		{"route level", "route r {\n  from file { path = \"a\" }\n  |\n}\n", []string{"id", "dedup", "filter", "map", "retry", "dlq", "to", "concurrency", "guarantee"}, []string{"from", "path"}},
		{"step attributes", "route r {\n  dedup { key = message_id\n    | }\n}\n", []string{"store", "ttl"}, []string{"key", "path"}},
		{"enum values", "route r {\n  from file { mode = | }\n}\n", []string{"consume", "subscribe", "group_subscribe"}, []string{"path"}},
		{"enum value being typed", "route r {\n  from file {\n    format = j|\n  }\n}\n", []string{"json", "csv"}, nil},
		{"booleans", "route r {\n  to sql { bulk_copy = | }\n}\n", []string{"true", "false"}, nil},
		{"guarantees", "route r {\n  guarantee |\n}\n", []string{"effectively_once", "at_least_once"}, nil},
		{"switch branches", "route r {\n  to switch {\n    on = meta[\"t\"]\n    |\n  }\n}\n", []string{"case", "default"}, []string{"on"}},
		{"inside an inline case", "route r {\n  to switch { on = meta[\"t\"]  case \"a\" { | } }\n}\n", []string{"to"}, []string{"on"}},
		{"inside a case", "route r {\n  to switch {\n    case \"a\" { | }\n  }\n}\n", []string{"to"}, []string{"case"}},
		{"nested kind in dlq", "route r {\n  dlq {\n    to file { | }\n  }\n}\n", []string{"path"}, []string{"to"}},
		{"top level", "|\n", []string{"route", "output"}, []string{"from"}},
		{"named endpoint kind", "output x = |\n", []string{"http", "sql"}, nil},
		{"named endpoint attributes", "output x = http {\n  |\n}\n", []string{"url", "method"}, nil},
		{"refs", "output enrich = http { url = \"http://x\" }\nroute r {\n  to ref |\n}\n", []string{"enrich"}, nil},
		{"unclosed block before another route", "route r {\n  from file { |\n\nroute s {\n  from file { path = \"a\" }\n}\n", []string{"path", "mode"}, nil},
		{"in a string", "route r {\n  from file { path = \"a|\" }\n}\n", nil, []string{"path", "mode"}},
		{"in a comment", "route r {\n  # from |\n}\n", nil, []string{"file", "dedup"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uri := fmt.Sprintf("file:///work/complete%d.mqb", i)
			cur := strings.Index(tt.src, "|")
			src := tt.src[:cur] + tt.src[cur+1:]
			c.open(uri, src)
			c.diagnostics(uri)
			var list struct {
				Items []struct {
					Label string `json:"label"`
				} `json:"items"`
			}
			c.call("textDocument/completion", textDoc(uri, at(t, tt.src, "|", 0)), &list)
			got := map[string]bool{}
			for _, it := range list.Items {
				got[it.Label] = true
			}
			for _, w := range tt.want {
				if !got[w] {
					t.Errorf("completions %v lack %q", got, w)
				}
			}
			for _, a := range tt.absent {
				if got[a] {
					t.Errorf("completions %v include %q", got, a)
				}
			}
			c.notify("textDocument/didClose", map[string]any{"textDocument": map[string]any{"uri": uri}})
			c.diagnostics(uri)
		})
	}
	c.shutdown()
}

func TestDefinitionAcrossDocuments(t *testing.T) {
	c := startServer(t)
	c.initialize()
	const (
		defsURI  = "file:///work/defs.mqb"
		routeURI = "file:///work/route.mqb"
		defs     = "# shared endpoints\noutput enrich = http {\n  url = \"http://127.0.0.1:8080/enrich\"\n}\n"
		route    = "route r {\n  from file { path = \"a.jsonl\" }\n  to ref enrich\n}\n"
	)
	c.open(defsURI, defs)
	c.diagnostics(defsURI)
	c.open(routeURI, route)
	// The ref resolves against the other open document: no E011.
	for _, d := range c.diagnostics(routeURI) {
		if d.Code == "E011" {
			t.Errorf("unknown ref across open documents: %+v", d)
		}
	}
	var locs []struct {
		URI   string   `json:"uri"`
		Range lspRange `json:"range"`
	}
	c.call("textDocument/definition", textDoc(routeURI, at(t, route, "enrich", 2)), &locs)
	start := at(t, defs, "enrich", 0)
	want := lspRange{Start: start, End: lspPos{Line: start.Line, Character: start.Character + len("enrich")}}
	if len(locs) != 1 || locs[0].URI != defsURI || locs[0].Range != want {
		t.Errorf("definition = %+v, want %s %+v", locs, defsURI, want)
	}
	// Hovering the ref names its declaration.
	var h struct {
		Contents struct{ Value string } `json:"contents"`
	}
	c.call("textDocument/hover", textDoc(routeURI, at(t, route, "enrich", 0)), &h)
	if !strings.Contains(h.Contents.Value, "output enrich = http") {
		t.Errorf("hover on ref = %q", h.Contents.Value)
	}
	// Not on a ref: no location.
	var none []any
	c.call("textDocument/definition", textDoc(routeURI, at(t, route, "file", 0)), &none)
	if len(none) != 0 {
		t.Errorf("definition off a ref = %v", none)
	}
	c.shutdown()
}

func TestFormatting(t *testing.T) {
	c := startServer(t)
	c.initialize()
	tests := []struct {
		name  string
		src   string
		edits int
	}{
		{"messy", "route   r {\nfrom file {path=\"a\"}\n    to file { path = \"b\" }\n}", 1},
		{"already formatted", "", 0},
		{"syntax error", "route r {\n  from file { path = \n}\n", 0},
	}
	formatted, ds := lang.Format("x.mqb", []byte(tests[0].src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	tests[1].src = string(formatted)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uri := fmt.Sprintf("file:///work/fmt%d.mqb", i)
			c.open(uri, tt.src)
			c.diagnostics(uri)
			var edits []struct {
				Range   lspRange `json:"range"`
				NewText string   `json:"newText"`
			}
			c.call("textDocument/formatting", map[string]any{
				"textDocument": map[string]any{"uri": uri},
				"options":      map[string]any{"tabSize": 2, "insertSpaces": true},
			}, &edits)
			if len(edits) != tt.edits {
				t.Fatalf("edits = %+v, want %d", edits, tt.edits)
			}
			if tt.edits == 1 {
				end := at(t, tt.src+"\x00", "\x00", 0)
				if edits[0].Range != (lspRange{End: end}) || edits[0].NewText != string(formatted) {
					t.Errorf("edit = %+v, want the whole document (to %+v) replaced by %q", edits[0], end, formatted)
				}
			}
		})
	}
	c.shutdown()
}

func TestUnknownMethodAndExitWithoutShutdown(t *testing.T) {
	c := startServer(t)
	c.initialize()
	c.nextID++
	c.send(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": "textDocument/nosuch", "params": map[string]any{}})
	m := c.recv()
	if m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("unknown method: %+v, want error -32601", m)
	}
	c.notify("exit", nil)
	select {
	case err := <-c.done:
		if err != errExitBeforeShutdown {
			t.Errorf("Serve = %v, want errExitBeforeShutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after exit")
	}
}
