package http

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mqb-dev/mqb/connector/internal/metaheader"
	"github.com/mqb-dev/mqb/internal/jsonvalue"
	"github.com/mqb-dev/mqb/plan"
	"github.com/mqb-dev/mqb/runtime"
)

// httpSink sends each record as one request (POST or PUT) to url, a
// template rendered per record, with the payload as the body. The headers
// are Content-Type (application/json on a JSON route, text/plain for text,
// application/octet-stream for raw), mq_bridge.message_id = message_id, and
// every forwarded meta entry (outside mqb.src.*) as Mqb-Meta-<key>: the
// prefix keeps a record's metadata from posing as a protocol header (Host,
// Authorization, Content-Length…). A key byte that may not appear in a
// header name — and '%' itself, so the mapping reverses — is sent
// percent-encoded (%20 for a space); a control character of a value is sent
// percent-encoded too (%0A for a newline).
//
// The requests of one write go out concurrently, at most httpInFlight at a
// time, so a receiver may see them out of order. A 2xx response is success.
// A network error, a response not complete within timeout, 408, 429 or 5xx
// fails the whole write, retryably: the route's retry step sends the whole
// batch again, the requests that had succeeded included — an endpoint
// cannot tell a repeat from a new record, so the route is at-least-once.
// Any other status (3xx: redirects are not followed; 4xx) fails that record
// alone, with the status and the start of the response body, and it goes
// to the DLQ.
//
// As the `call` of a request the response is the answer: a non-empty
// response body replaces the payload (decoded as JSON on a JSON route when
// it is JSON, else kept as text), and meta["http.status"] holds the status
// code, for the forward to read.
//
// The url may hold credentials or a token: errors, logs and DLQ reasons
// show it with its password, a bare userinfo, every query value and the
// value of every env() placeholder replaced by xxxxx (and the same text
// scrubbed from the response snippets they quote).
type httpSink struct {
	route       string
	method      string
	url         *runtime.Template
	shown       string // the url template as logs may show it
	timeout     time.Duration
	contentType string
	json        bool // the route's payloads are JSON
	client      *nethttp.Client
	transport   *nethttp.Transport

	// envSecrets are the values of the url's env() placeholders: a token
	// may sit anywhere in the url (a webhook's path), so they are scrubbed
	// from whatever shows the url.
	envSecrets []string

	// call is set when the sink is a request's call: the response then
	// replaces the payload and tags meta["http.status"].
	call bool

	// fromRecord[i] says whether the url's i-th placeholder reads the
	// record (payload, meta, message_id): such a value is escaped for its
	// position in the url, so record data can never change the url's
	// structure. A placeholder of configuration only (env("HOOK")) is
	// spliced as written: it may hold a whole url or several segments.
	fromRecord []bool
}

const (
	// httpInFlight bounds the concurrent requests of one write.
	httpInFlight = 16
	// httpMaxResponseBytes bounds a response body a call keeps as the
	// payload (the file source's default max_record_bytes).
	httpMaxResponseBytes = 16 << 20
	// httpDrainBytes is how much of a response body a plain sink reads, so
	// the connection can be reused; a longer body closes it.
	httpDrainBytes = 64 << 10
	// httpSnippetBytes is how much of a refusing response's body a
	// record's reason quotes.
	httpSnippetBytes = 200
	// metaHTTPStatus is where a call puts the response's status code.
	metaHTTPStatus = "http.status"
	// httpMetaHeaderPrefix prefixes a forwarded meta key's header name.
	httpMetaHeaderPrefix = "Mqb-Meta-"
)

// httpSinkConfig is an http sink's attributes (stdlib declares them).
type httpSinkConfig struct {
	// URL is rendered per record: compileTemplate compiles it from the
	// node, naming the attribute in its errors.
	URL     []plan.Part   `attr:"url"`
	Method  string        `attr:"method"`
	Timeout time.Duration `attr:"timeout"`
}

func init() {
	runtime.RegisterSink("http", func(b *runtime.BuildEnv, cfg *httpSinkConfig) (runtime.Sink, []*runtime.Program, error) {
		s, err := newHTTPSink(b, cfg)
		if err != nil {
			return nil, nil, err
		}
		return s, s.url.Programs(), nil
	})
}

func newHTTPSink(b *runtime.BuildEnv, cfg *httpSinkConfig) (*httpSink, error) {
	tmpl, err := b.Template("url")
	if err != nil {
		return nil, err
	}
	if tmpl == nil {
		return nil, b.Errorf("url", "required")
	}
	s := &httpSink{
		route:  b.Route(),
		method: cfg.Method,
		url:    tmpl,
		shown:  redactTemplateURL(tmpl.Parts()),
	}
	if s.envSecrets, err = envValues(b, tmpl.Parts()); err != nil {
		return nil, err
	}
	i := 0
	progs := tmpl.Programs()
	for _, p := range tmpl.Parts() {
		if p.Expr == "" {
			continue
		}
		prog := progs[i]
		i++
		// A bare meta lookup (meta["k"]) reads the record: its text holds "meta".
		s.fromRecord = append(s.fromRecord, prog.UsesPayload() || prog.UsesMessageID() || strings.Contains(p.Expr, "meta"))
	}
	switch s.method {
	case nethttp.MethodPost, nethttp.MethodPut:
	default:
		return nil, b.Errorf("method", "want POST or PUT, got %q", s.method)
	}
	if s.timeout = cfg.Timeout; s.timeout <= 0 {
		return nil, b.Errorf("timeout", "must be positive, got %v", s.timeout)
	}
	if tmpl.IsStatic() {
		static, _ := tmpl.Render(nil)
		if _, err := checkHTTPURL(static); err != nil {
			return nil, b.Errorf("url", "%s", err)
		}
	}
	switch b.SourceFormat() {
	case "json", "":
		s.contentType, s.json = "application/json", true
	case "text":
		s.contentType = "text/plain; charset=utf-8"
	default:
		s.contentType = "application/octet-stream"
	}
	dialer := &net.Dialer{Timeout: min(s.timeout, 10*time.Second), KeepAlive: 30 * time.Second}
	s.transport = &nethttp.Transport{
		Proxy:                 nethttp.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * httpInFlight,
		MaxIdleConnsPerHost:   4 * httpInFlight, // several workers of a route share the client
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   min(s.timeout, 10*time.Second),
		ResponseHeaderTimeout: s.timeout,
		ExpectContinueTimeout: time.Second,
	}
	s.client = &nethttp.Client{
		Transport: s.transport,
		// A redirect is the endpoint's answer, not a delivery: following a
		// 301/302 would turn the POST into a body-less GET.
		CheckRedirect: func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse },
	}
	b.Logger().Info("http sink", "url", s.shown, "method", s.method, "timeout", s.timeout)
	return s, nil
}

// RespondAsCall makes the sink a request's call: see httpSink.
func (s *httpSink) RespondAsCall() { s.call = true }

// envValues evaluates the url's placeholders that call env() and read no
// record data, for the values to be scrubbed from errors.
func envValues(b *runtime.BuildEnv, parts []plan.Part) ([]string, error) {
	var out []string
	var ev runtime.Evaluator
	for _, p := range parts {
		if !strings.Contains(p.Expr, "env(") {
			continue
		}
		prog, err := b.Compile(p.Expr)
		if err != nil {
			return nil, b.Errorf("url", "${%s}: %v", p.Expr, err)
		}
		if prog.UsesPayload() || prog.UsesMessageID() || strings.Contains(p.Expr, "meta") {
			continue
		}
		v, present, err := ev.Run(prog, &runtime.Record{})
		if err != nil || !present {
			continue // the record's render reports it
		}
		if str, err := runtime.Stringify(v); err == nil && len(str) >= 3 {
			out = append(out, str)
		}
	}
	return out, nil
}

// renderURL renders the url template for r, escaping each value read from
// the record for where it lands: a path segment (url.PathEscape; "." and
// ".." spelled %2E so they cannot climb), the query or fragment
// (url.QueryEscape). In the scheme or host a record value may not hold
// characters that end the host; before "://" (the value is the whole url)
// it is spliced as written.
func (s *httpSink) renderURL(r *runtime.Record) (string, error) {
	return s.url.RenderWith(r, func(i int, prefix, v string) (string, error) {
		if !s.fromRecord[i] {
			return v, nil
		}
		return escapeURLValue(prefix, v)
	})
}

// escapeURLValue escapes v for the position in a url that follows prefix.
func escapeURLValue(prefix, v string) (string, error) {
	_, rest, ok := strings.Cut(prefix, "://")
	switch {
	case !ok:
		return v, nil
	case !strings.ContainsAny(rest, "/?#"): // in the host
		if strings.ContainsAny(v, "/?#@\\ \t\r\n") {
			return "", errors.New("the value would change the url's host (it holds one of / ? # @ \\ or a space)")
		}
		return v, nil
	case strings.ContainsAny(rest, "?#"):
		return url.QueryEscape(v), nil
	case strings.Trim(v, ".") == "":
		return strings.Repeat("%2E", len(v)), nil
	}
	return url.PathEscape(v), nil
}

// checkHTTPURL parses a rendered url and refuses what no request can go to;
// its error never quotes the url.
func checkHTTPURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a URL (%v)", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("want an http:// or https:// URL, got scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("the URL names no host")
	}
	return u, nil
}

// httpRequest is one record's request, ready to send.
type httpRequest struct {
	rec *runtime.Record
	req *nethttp.Request
	raw string   // the rendered url
	env []string // values of the url's env() placeholders
}

// secrets is the text of the url that must not appear in errors; worked
// out only when an error needs it (it parses the url).
func (q *httpRequest) secrets() []string { return urlSecretsOf(q.raw, q.env...) }

// shown is the url as errors may show it.
func (q *httpRequest) shown() string { return scrubSecrets(redactHTTPURL(q.raw), q.secrets()) }

// httpResult is what became of one request.
type httpResult struct {
	sent   bool
	status int
	body   []byte // a call's response body
	refuse string // the record fails alone, for this reason
	retry  error  // the whole write fails, retryably
}

// request builds r's request: the rendered url, the payload as the body,
// the message_id and forwarded meta headers.
func (s *httpSink) request(r *runtime.Record) (*httpRequest, error) {
	raw, err := s.renderURL(r)
	if err != nil {
		return nil, errors.New(scrubSecrets(err.Error(), s.envSecrets))
	}
	q := &httpRequest{rec: r, raw: raw, env: s.envSecrets}
	if _, err := checkHTTPURL(raw); err != nil {
		return nil, fmt.Errorf("url %s: %v", q.shown(), err)
	}
	if err := r.EncodePayload(); err != nil {
		return nil, err
	}
	req, err := nethttp.NewRequest(s.method, raw, bytes.NewReader(r.Payload))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text quotes the url
		}
		return nil, fmt.Errorf("url %s: %s", q.shown(), scrubSecrets(err.Error(), q.secrets()))
	}
	keys := runtime.ForwardedMeta(r)
	h := make(nethttp.Header, len(keys)+3)
	// Assigned directly: Header.Set would canonicalise the names.
	h["Content-Type"] = []string{s.contentType}
	h["User-Agent"] = []string{"mqb"}
	h[runtime.HeaderMessageID] = []string{r.MessageID()}
	for _, k := range keys {
		h[httpMetaHeaderName(k)] = []string{httpHeaderValue(r.Meta[k])}
	}
	req.Header = h
	q.req = req
	return q, nil
}

// do sends one request and classifies the outcome.
func (s *httpSink) do(ctx context.Context, q *httpRequest) (res httpResult) {
	res.sent = true
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// what names the request in errors (built only for one).
	what := func() string { return s.method + " " + q.shown() }
	resp, err := s.client.Do(q.req.WithContext(rctx))
	if err != nil {
		res.retry = s.transportError(rctx, what(), err, q.secrets())
		return res
	}
	defer resp.Body.Close()
	res.status = resp.StatusCode
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	limit := int64(httpDrainBytes)
	if ok && s.call {
		limit = httpMaxResponseBytes + 1
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil && ok && s.call {
		// The status says delivered, but a call needs the whole answer.
		res.retry = s.transportError(rctx, what()+": reading the response", err, q.secrets())
		return res
	}
	switch {
	case ok:
		if s.call {
			if len(body) > httpMaxResponseBytes {
				res.refuse = fmt.Sprintf("http: %s: %s: response body over %d bytes", what(), resp.Status, httpMaxResponseBytes)
				return res
			}
			res.body = body
		}
	case resp.StatusCode == nethttp.StatusRequestTimeout, resp.StatusCode == nethttp.StatusTooManyRequests, resp.StatusCode >= 500:
		res.retry = errors.New(httpStatusText(what(), resp, body, q.secrets()))
	default:
		res.refuse = "http: " + httpStatusText(what(), resp, body, q.secrets())
	}
	return res
}

// transportError describes a request that got no usable response.
func (s *httpSink) transportError(rctx context.Context, what string, err error, secrets []string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text quotes the url
	}
	msg := err.Error()
	if errors.Is(rctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (ue != nil && ue.Timeout()) {
		msg = fmt.Sprintf("no response within the %v timeout (%s)", s.timeout, msg)
	}
	return fmt.Errorf("%s: %s", what, scrubSecrets(msg, secrets))
}

// httpStatusText is a refusing response: the request, the status and the
// start of the body, on one line.
func httpStatusText(what string, resp *nethttp.Response, body []byte, secrets []string) string {
	msg := what + ": " + resp.Status
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		msg += " (redirects are not followed"
		if loc := resp.Header.Get("Location"); loc != "" {
			msg += "; Location: " + redactHTTPURL(loc)
		}
		msg += ")"
	}
	if snip := bodySnippet(body); snip != "" {
		msg += ": " + snip
	}
	return scrubSecrets(msg, secrets)
}

// bodySnippet is the start of a response body as one line of valid text.
func bodySnippet(body []byte) string {
	cut := len(body) > httpSnippetBytes
	if cut {
		body = body[:httpSnippetBytes]
		// Do not end on half a character.
		for range utf8.UTFMax - 1 {
			if r, size := utf8.DecodeLastRune(body); r != utf8.RuneError || size != 1 {
				break
			}
			body = body[:len(body)-1]
		}
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "\uFFFD")), " ")
	if cut {
		s += "…"
	}
	return s
}

func (s *httpSink) Write(ctx context.Context, recs []*runtime.Record) error {
	reqs := make([]*httpRequest, len(recs))
	for i, r := range recs {
		q, err := s.request(r)
		if err != nil {
			r.Refuse("http: " + err.Error())
			continue
		}
		reqs[i] = q
	}
	results := make([]httpResult, len(recs))
	// Once one request fails the write, the others left are not sent: the
	// retry sends the whole batch again anyway.
	stop := make(chan struct{})
	var stopOnce sync.Once
	sem := make(chan struct{}, httpInFlight)
	var wg sync.WaitGroup
send:
	for i, q := range reqs {
		if q == nil {
			continue
		}
		select {
		case <-stop:
			break send
		case sem <- struct{}{}:
		}
		select {
		case <-stop:
			<-sem
			break send
		default:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = s.do(ctx, q)
			if results[i].retry != nil {
				stopOnce.Do(func() { close(stop) })
			}
		}()
	}
	wg.Wait()

	var failed, total, unsent int
	var first error
	for i, q := range reqs {
		if q == nil {
			continue
		}
		total++
		switch res := &results[i]; {
		case !res.sent:
			unsent++
		case res.retry != nil:
			failed++
			if first == nil {
				first = res.retry
			}
		}
	}
	if first != nil {
		notSent := ""
		if unsent > 0 {
			notSent = fmt.Sprintf(" (%d not sent)", unsent)
		}
		return runtime.Retryable(fmt.Errorf("route %s: http sink: %d of %d requests failed%s, first: %w",
			s.route, failed, total, notSent, first))
	}
	// Every request was answered: only now may a call's answers change the
	// records, so a retried write always sends them as they were.
	var dec *jsonvalue.Decoder
	for i, q := range reqs {
		if q == nil {
			continue
		}
		r, res := recs[i], &results[i]
		if res.refuse != "" {
			r.Refuse(res.refuse)
			continue
		}
		if !s.call {
			continue
		}
		r.SetMeta(metaHTTPStatus, strconv.Itoa(res.status))
		if len(res.body) == 0 {
			continue // nothing to replace the payload with (204 No Content)
		}
		var value any = string(res.body)
		if s.json {
			if dec == nil {
				dec = jsonvalue.NewDecoder()
			}
			if v, err := dec.Decode(res.body); err == nil {
				value = v
			}
		}
		r.SetPayload(res.body, value)
	}
	return nil
}

func (s *httpSink) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// httpMetaHeaderName maps a meta key to its header name: Mqb-Meta-<key>,
// encoded as metaheader.Name does.
func httpMetaHeaderName(key string) string { return metaheader.Name(httpMetaHeaderPrefix, key) }

// httpHeaderValue is a meta value as a header sends it (metaheader.Value).
func httpHeaderValue(v string) string { return metaheader.Value(v) }

// redactHTTPURL shows a url with its password (or a bare userinfo, which
// is a token) and every query value replaced by xxxxx, and no fragment.
func redactHTTPURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		s := plan.RedactURLs(raw)
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i] + "?xxxxx"
		}
		if i := strings.Index(s, "://"); i >= 0 {
			if j := strings.IndexByte(s[i+3:], '@'); j >= 0 && !strings.ContainsAny(s[i+3:i+3+j], "/:") {
				s = s[:i+3] + "xxxxx" + s[i+3+j:]
			}
		}
		return s
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i := range vs {
				vs[i] = "xxxxx"
			}
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return plan.RedactURLs(u.String())
}

// redactTemplateURL shows the url template for logs: redacted as a url,
// with its ${…} placeholders written back.
func redactTemplateURL(parts []plan.Part) string {
	var b strings.Builder
	var exprs []string
	for _, p := range parts {
		if p.Expr == "" {
			b.WriteString(p.Lit)
			continue
		}
		fmt.Fprintf(&b, "MQBPLACEHOLDER%dX", len(exprs))
		exprs = append(exprs, p.Expr)
	}
	s := redactHTTPURL(b.String())
	for i, e := range exprs {
		s = strings.Replace(s, fmt.Sprintf("MQBPLACEHOLDER%dX", i), "${"+e+"}", 1)
	}
	return s
}

// urlSecretsOf lists the parts of a rendered url that must not be shown:
// the userinfo's password (or the whole userinfo when it is a bare token),
// the Basic credentials made of it, and every query value long enough to
// be a credential (a short one, such as format=json, would scrub ordinary
// words); with extra, longest first.
func urlSecretsOf(raw string, extra ...string) []string {
	out := slices.Clone(extra)
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	if u.User != nil {
		p, has := u.User.Password()
		if !has {
			p = u.User.Username()
		}
		if len(p) >= 3 {
			out = append(out, p)
		}
		if has {
			// The Basic credentials the client sends, should they be echoed.
			out = append(out, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+p)))
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= 8 {
				out = append(out, v)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// scrubSecrets replaces each secret in s (and its query-escaped form) with
// xxxxx: a response may echo the url it was asked for.
func scrubSecrets(s string, secrets []string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, "xxxxx")
		if esc := url.QueryEscape(sec); esc != sec {
			s = strings.ReplaceAll(s, esc, "xxxxx")
		}
		if esc := url.PathEscape(sec); esc != sec {
			s = strings.ReplaceAll(s, esc, "xxxxx")
		}
	}
	return s
}
