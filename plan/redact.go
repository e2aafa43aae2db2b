package plan

import (
	"net/url"
	"slices"
	"strings"

	"github.com/mqb-dev/mqb/internal/lazyre"
)

// Redacted returns a deep copy of p with every password in a URL-looking
// string replaced by "xxxxx". Write only redacted plans to files or terminals.
func (p Plan) Redacted() Plan {
	out := p
	out.Routes = make([]Route, len(p.Routes))
	for i, r := range p.Routes {
		out.Routes[i] = r.Redacted()
	}
	return out
}

// Redacted returns r with its nodes deep-copied and every password in a
// URL-looking string of them replaced by "xxxxx", as Plan.Redacted does
// for each route.
func (r Route) Redacted() Route {
	r.Nodes = redactNodes(r.Nodes)
	return r
}

// redactedShared is r redacted as Redacted does, for encoding at once
// and throwing away: it copies only the nodes and values redaction
// changes and shares the rest with r, so neither may be changed after.
func (r Route) redactedShared() Route {
	var out []Node
	for i, n := range r.Nodes {
		if !nodeNeedsRedacting(n) {
			continue
		}
		if out == nil {
			out = slices.Clone(r.Nodes)
		}
		out[i] = redactNode(n)
	}
	if out != nil {
		r.Nodes = out
	}
	return r
}

// nodeNeedsRedacting reports whether redactNode could change n: whether
// a value of it, its assignments or its children holds a string with an
// "@" or a "?" (RedactURLs changes no other) or a secret.
func nodeNeedsRedacting(n Node) bool {
	for _, v := range n.Attrs {
		if valueNeedsRedacting(v) {
			return true
		}
	}
	for _, a := range n.Assign {
		if a.Value != nil && valueNeedsRedacting(*a.Value) {
			return true
		}
	}
	for _, b := range n.Children {
		if nodeNeedsRedacting(b.Node) {
			return true
		}
	}
	return false
}

func valueNeedsRedacting(v Value) bool {
	if v.Secret || mayHoldURLSecret(v.Str) {
		return true
	}
	for _, p := range v.Template {
		if mayHoldURLSecret(p.Lit) {
			return true
		}
	}
	for _, e := range v.List {
		if valueNeedsRedacting(e) {
			return true
		}
	}
	for _, e := range v.Block {
		if valueNeedsRedacting(e) {
			return true
		}
	}
	return false
}

// mayHoldURLSecret reports whether RedactURLs could change s: a userinfo
// secret ends at an "@" and a query starts at a "?".
func mayHoldURLSecret(s string) bool {
	return strings.IndexByte(s, '@') >= 0 || strings.IndexByte(s, '?') >= 0
}

func redactNodes(ns []Node) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		out[i] = redactNode(n)
	}
	return out
}

func redactNode(n Node) Node {
	if n.Attrs != nil {
		attrs := make(map[string]Value, len(n.Attrs))
		for k, v := range n.Attrs {
			attrs[k] = redactValue(v)
		}
		n.Attrs = attrs
	}
	if n.Assign != nil {
		as := make([]Assignment, len(n.Assign))
		for i, a := range n.Assign {
			if a.Value != nil {
				v := redactValue(*a.Value)
				a.Value = &v
			}
			as[i] = a
		}
		n.Assign = as
	}
	if n.Children != nil {
		ch := make([]Branch, len(n.Children))
		for i, b := range n.Children {
			b.Node = redactNode(b.Node)
			ch[i] = b
		}
		n.Children = ch
	}
	return n
}

func redactValue(v Value) Value {
	v.Str = RedactURLs(v.Str)
	if v.Secret && v.Str != "" {
		v.Str = redactedText
	}
	if v.Template != nil {
		t := make([]Part, len(v.Template))
		for i, p := range v.Template {
			p.Lit = RedactURLs(p.Lit)
			if v.Secret && p.Lit != "" {
				p.Lit = redactedText
			}
			t[i] = p
		}
		v.Template = t
	}
	if v.List != nil {
		l := make([]Value, len(v.List))
		for i, e := range v.List {
			l[i] = redactValue(e)
		}
		v.List = l
	}
	if v.Block != nil {
		b := make(map[string]Value, len(v.Block))
		for k, e := range v.Block {
			b[k] = redactValue(e)
		}
		v.Block = b
	}
	return v
}

// schemeRE finds where a URL starts: its scheme and "://".
var schemeRE = lazyre.New(`[a-zA-Z][a-zA-Z0-9+.-]*://`)

// tokenSchemes are the schemes whose bare userinfo (nats://TOKEN@host) is
// token authentication, so the whole userinfo is the secret.
var tokenSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// RedactURLs replaces the password of every scheme://user:password@ in s,
// the token of every nats://token@, and the value of password-like query
// parameters, with "xxxxx". A password may hold a raw "@": the userinfo
// ends at the LAST "@" before the host (the host ends at the first "/",
// "?" or "#" after an "@"), so nothing of the password is left.
func RedactURLs(s string) string {
	if !mayHoldURLSecret(s) { // most of a plan's strings
		return s
	}
	s = redactUserinfo(s)
	if u, err := url.Parse(s); err == nil && u.RawQuery != "" {
		q := u.Query()
		changed := false
		for k := range q {
			switch k {
			case "password", "pass", "pwd", "secret", "token", "sslpassword":
				q.Set(k, "xxxxx")
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return s
}

// redactedText replaces a secret's literal text.
const redactedText = "xxxxx"

// redactUserinfo redacts the userinfo secret of every URL in s.
func redactUserinfo(s string) string {
	var b strings.Builder
	for {
		loc := schemeRE().FindStringIndex(s)
		if loc == nil {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:loc[1]])
		scheme := strings.ToLower(s[loc[0] : loc[1]-3])
		s = s[loc[1]:]
		// The URL runs to the next space or quote.
		end := strings.IndexAny(s, " \t\r\n\"'<>`")
		if end < 0 {
			end = len(s)
		}
		rest := s[:end]
		// The user name holds no ':', '@' or '/'.
		u := strings.IndexAny(rest, ":@/?#")
		if u < 0 || rest[u] == '/' || rest[u] == '?' || rest[u] == '#' {
			continue
		}
		at := strings.IndexByte(rest[u:], '@')
		if at < 0 {
			continue
		}
		at += u
		host := len(rest)
		if i := strings.IndexAny(rest[at:], "/?#"); i >= 0 {
			host = at + i
		}
		last := strings.LastIndexByte(rest[:host], '@')
		switch {
		case rest[u] == ':':
			b.WriteString(rest[:u+1] + redactedText)
		case tokenSchemes[scheme]:
			b.WriteString(redactedText)
		default: // user@host: a user alone is not a secret
			b.WriteString(rest[:last])
		}
		s = s[last:]
	}
}
