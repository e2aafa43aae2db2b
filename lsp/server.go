package lsp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"sort"
	"strings"
	"sync"

	"go.lsp.dev/jsonrpc2"
	"go.lsp.dev/protocol"
	"go.lsp.dev/uri"

	"github.com/mqb-dev/mqb/compiler"
	"github.com/mqb-dev/mqb/diag"
	"github.com/mqb-dev/mqb/lang"
	"github.com/mqb-dev/mqb/plan"
)

// Version is reported to the client as the server's version.
const Version = "0.1"

// Serve runs a language server on rwc (stdin/stdout for `mqbc lsp`) until
// the client sends exit, the stream ends or ctx is cancelled. Protocol
// trouble is logged to logw (stderr; nil discards it).
func Serve(ctx context.Context, rwc io.ReadWriteCloser, logw io.Writer) error {
	if logw == nil {
		logw = io.Discard
	}
	s := &server{
		docs: map[protocol.DocumentURI]*document{},
		log:  log.New(logw, "mqbc lsp: ", 0),
		exit: make(chan struct{}),
	}
	s.conn = jsonrpc2.NewConn(newFrameStream(rwc, s.log))
	s.conn.Go(ctx, s.handle)
	// On exit or cancellation the stream is closed and Serve returns at
	// once: a reader blocked on stdin may not wake up, and the process is
	// about to end anyway.
	select {
	case <-ctx.Done():
		s.conn.Close()
		return ctx.Err()
	case <-s.exit:
		s.conn.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.shutdown {
			return errExitBeforeShutdown
		}
		return nil
	case <-s.conn.Done():
		// A frame the server cannot read past ends the session with an
		// error (mqbc lsp exits 1); the client going away without exit
		// (the stream ends between frames) is not one, for an editor
		// that was killed.
		if err := s.conn.Err(); errors.Is(err, errFraming) {
			return fmt.Errorf("reading from the client: %w", err)
		}
		return nil
	}
}

// errExitBeforeShutdown is returned when the client sends exit without
// shutdown; the protocol asks the server to exit with code 1 then.
var errExitBeforeShutdown = errors.New("exit before shutdown")

// server holds the open documents. Requests are handled one at a time in
// arrival order (jsonrpc2 reads the next message only after the handler
// returns), so a request always sees the changes sent before it.
type server struct {
	conn     jsonrpc2.Conn
	log      *log.Logger
	mu       sync.Mutex
	docs     map[protocol.DocumentURI]*document
	shutdown bool
	exit     chan struct{}
	exitOnce sync.Once
}

// document is one open .mqb document and what was learned from it.
type document struct {
	uri     protocol.DocumentURI
	name    string // the file name diagnostics and plan positions carry
	version int32
	text
	file    *lang.File // the declarations that parsed
	parse   diag.List  // lexical and syntax errors
	outline *block
	routes  []plan.Route // this document's compiled routes
	diags   diag.List    // everything reported about this document
}

func newDocument(u protocol.DocumentURI, version int32, src string) *document {
	d := &document{uri: u, name: fileName(u), version: version, text: newText([]byte(src))}
	d.file, d.parse = lang.Parse(d.name, d.src)
	d.outline = buildOutline(d.src)
	return d
}

// fileName is the name the compiler sees: the path of a file URI, else the
// URI itself (untitled documents).
func fileName(u protocol.DocumentURI) string {
	if strings.HasPrefix(string(u), uri.FileScheme+"://") {
		if name, ok := safeFilename(u); ok {
			return name
		}
	}
	return string(u)
}

func safeFilename(u protocol.DocumentURI) (name string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return u.Filename(), true
}

func (s *server) handle(ctx context.Context, reply jsonrpc2.Replier, req jsonrpc2.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	result, err := s.safeDispatch(ctx, req)
	if err != nil {
		s.log.Printf("%s: %v", req.Method(), err)
	}
	return reply(ctx, result, err)
}

// safeDispatch keeps the server alive through a bug in one feature: the
// request fails and the editor keeps its diagnostics and other features.
func (s *server) safeDispatch(ctx context.Context, req jsonrpc2.Request) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, jsonrpc2.Errorf(jsonrpc2.InternalError, "%s: internal error: %v", req.Method(), p)
		}
	}()
	return s.dispatch(ctx, req)
}

// dispatch answers one request or notification. A returned error becomes
// the JSON-RPC error of a request (and is only logged for a notification).
func (s *server) dispatch(ctx context.Context, req jsonrpc2.Request) (any, error) {
	params := req.Params()
	switch req.Method() {
	case protocol.MethodInitialize:
		return s.initialize(), nil
	case protocol.MethodInitialized:
		return nil, nil
	case protocol.MethodShutdown:
		s.shutdown = true
		return nil, nil
	case protocol.MethodExit:
		s.exitOnce.Do(func() { close(s.exit) })
		return nil, nil
	case protocol.MethodTextDocumentDidOpen:
		var p protocol.DidOpenTextDocumentParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		s.docs[p.TextDocument.URI] = newDocument(p.TextDocument.URI, p.TextDocument.Version, p.TextDocument.Text)
		s.analyze(ctx)
		return nil, nil
	case protocol.MethodTextDocumentDidChange:
		var p protocol.DidChangeTextDocumentParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		if len(p.ContentChanges) == 0 {
			return nil, nil
		}
		// Full sync: the last change holds the whole text.
		text := p.ContentChanges[len(p.ContentChanges)-1].Text
		s.docs[p.TextDocument.URI] = newDocument(p.TextDocument.URI, p.TextDocument.Version, text)
		s.analyze(ctx)
		return nil, nil
	case protocol.MethodTextDocumentDidClose:
		var p protocol.DidCloseTextDocumentParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		delete(s.docs, p.TextDocument.URI)
		// A closed document keeps no diagnostics in the editor.
		s.publish(ctx, p.TextDocument.URI, 0, []protocol.Diagnostic{})
		s.analyze(ctx)
		return nil, nil
	case protocol.MethodTextDocumentDidSave, protocol.MethodWorkspaceDidChangeWatchedFiles,
		protocol.MethodWorkspaceDidChangeConfiguration, "$/cancelRequest", "$/setTrace":
		return nil, nil
	case protocol.MethodTextDocumentHover:
		var p protocol.HoverParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		if d := s.docs[p.TextDocument.URI]; d != nil {
			if h := s.hover(d, d.offset(p.Position)); h != nil {
				return h, nil
			}
		}
		return nil, nil
	case protocol.MethodTextDocumentCompletion:
		var p protocol.CompletionParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		list := &protocol.CompletionList{Items: []protocol.CompletionItem{}}
		if d := s.docs[p.TextDocument.URI]; d != nil {
			list.Items = s.complete(d, d.offset(p.Position))
		}
		return list, nil
	case protocol.MethodTextDocumentDefinition:
		var p protocol.DefinitionParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		if d := s.docs[p.TextDocument.URI]; d != nil {
			if locs := s.definition(d, d.offset(p.Position)); len(locs) > 0 {
				return locs, nil
			}
		}
		return nil, nil
	case protocol.MethodTextDocumentFormatting:
		var p protocol.DocumentFormattingParams
		if err := unmarshal(params, &p); err != nil {
			return nil, err
		}
		if d := s.docs[p.TextDocument.URI]; d != nil {
			return format(d), nil
		}
		return nil, nil
	}
	if _, isCall := req.(*jsonrpc2.Call); isCall {
		return nil, jsonrpc2.Errorf(jsonrpc2.MethodNotFound, "method not supported: %s", req.Method())
	}
	return nil, nil
}

func unmarshal(params json.RawMessage, v any) error {
	if err := json.Unmarshal(params, v); err != nil {
		return jsonrpc2.Errorf(jsonrpc2.InvalidParams, "%v", err)
	}
	return nil
}

func (s *server) initialize() *protocol.InitializeResult {
	return &protocol.InitializeResult{
		Capabilities: protocol.ServerCapabilities{
			TextDocumentSync: &protocol.TextDocumentSyncOptions{
				OpenClose: true,
				Change:    protocol.TextDocumentSyncKindFull,
			},
			HoverProvider: true,
			CompletionProvider: &protocol.CompletionOptions{
				// After "from " a kind; after "= " an enum value.
				TriggerCharacters: []string{" ", "="},
			},
			DefinitionProvider:         true,
			DocumentFormattingProvider: true,
		},
		ServerInfo: &protocol.ServerInfo{Name: "mqbc lsp", Version: Version},
	}
}

// analyze recompiles every open document and publishes its diagnostics.
// A change to one document can fix or break a `ref` in another, so all are
// redone; a handful of open files compiles in milliseconds.
func (s *server) analyze(ctx context.Context) {
	for _, u := range s.sortedURIs() {
		d := s.docs[u]
		s.compile(d)
		s.publish(ctx, d.uri, d.version, d.lspDiagnostics())
	}
}

func (s *server) sortedURIs() []protocol.DocumentURI {
	out := make([]protocol.DocumentURI, 0, len(s.docs))
	for u := range s.docs {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// compile checks d together with the open documents that declare the
// endpoints it refers to and does not declare itself, so `ref` across files
// resolves while unrelated documents (which may reuse route names) stay out.
func (s *server) compile(d *document) {
	files := []*lang.File{d.file}
	declared := endpointNames(d.file)
	for _, name := range refNames(d.outline) {
		if declared[name] {
			continue
		}
		for _, u := range s.sortedURIs() {
			other := s.docs[u]
			if other != d && endpointNames(other.file)[name] && !contains(files, other.file) {
				files = append(files, other.file)
			}
		}
	}
	p, ds := compiler.Compile(files)
	d.routes = nil
	for _, r := range p.Routes {
		if r.Pos.File == d.name {
			d.routes = append(d.routes, r)
		}
	}
	d.diags = append(diag.List{}, d.parse...)
	for _, x := range ds {
		if x.Range.Start.File == d.name || x.Range.Start.File == "" {
			d.diags = append(d.diags, x)
		}
	}
	d.diags.Sort()
}

func contains(files []*lang.File, f *lang.File) bool {
	for _, g := range files {
		if g == f {
			return true
		}
	}
	return false
}

// endpointNames lists the named endpoints a parsed file declares.
func endpointNames(f *lang.File) map[string]bool {
	out := map[string]bool{}
	for _, decl := range f.Decls {
		if decl != nil && decl.Endpoint != nil && decl.Endpoint.Name != nil {
			out[decl.Endpoint.Name.Name] = true
		}
	}
	return out
}

// refNames lists the NAMEs of every `ref NAME` in the outline.
func refNames(b *block) []string {
	var out []string
	for _, st := range b.stmts {
		for i := 0; i+1 < len(st.toks); i++ {
			if st.toks[i].Value == "ref" && st.toks[i+1].Type == lang.TIdent {
				out = append(out, st.toks[i+1].Value)
			}
		}
	}
	for _, c := range b.blocks {
		out = append(out, refNames(c)...)
	}
	return out
}

// lspDiagnostics converts the document's diagnostics to the protocol's.
func (d *document) lspDiagnostics() []protocol.Diagnostic {
	out := make([]protocol.Diagnostic, 0, len(d.diags))
	for _, x := range d.diags {
		sev := protocol.DiagnosticSeverityError
		if x.Severity == diag.Warning {
			sev = protocol.DiagnosticSeverityWarning
		}
		msg := x.Summary
		if x.Detail != "" {
			msg += "\n" + x.Detail
		}
		out = append(out, protocol.Diagnostic{
			Range:    d.diagRange(x.Range),
			Severity: sev,
			Code:     x.Code,
			Source:   "mqb",
			Message:  msg,
		})
	}
	return out
}

func (s *server) publish(ctx context.Context, u protocol.DocumentURI, version int32, ds []protocol.Diagnostic) {
	err := s.conn.Notify(ctx, protocol.MethodTextDocumentPublishDiagnostics, &protocol.PublishDiagnosticsParams{
		URI: u, Version: uint32(max(version, 0)), Diagnostics: ds,
	})
	if err != nil {
		s.log.Printf("publish diagnostics for %s: %v", u, err)
	}
}

// format returns the edits that give d its canonical layout: none when the
// text has syntax errors (the formatter would drop what it cannot parse) or
// is already formatted, else one edit replacing the whole document.
func format(d *document) []protocol.TextEdit {
	out, ds := lang.Format(d.name, d.src)
	if ds.HasErrors() || string(out) == string(d.src) {
		return []protocol.TextEdit{}
	}
	return []protocol.TextEdit{{Range: d.span(0, len(d.src)), NewText: string(out)}}
}
